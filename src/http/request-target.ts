import type { IncomingMessage } from 'node:http';

/**
 * The request-target (RFC 9112 §3.2) as the routes read it. A server MUST accept the absolute-form
 * (`POST http://host/mcp HTTP/1.1`) as well as the usual origin-form (`POST /mcp`): proxies send it, and so do
 * clients set up to use one. node:http hands the target over as it came, so a route, the MCP endpoints' web Request
 * and the access log would each meet `http://host/mcp` where they expect `/mcp` (the MCP endpoints answered it 500).
 * It is rewritten once, before routing (Fastify's `rewriteUrl`), and an origin server then takes the host from the
 * target, not from the Host header (RFC 9112 §3.2.2), so the MCP hosts' DNS-rebinding check judges that host.
 *
 * A path whose percent-encoding does not decode (`/me%`, `/%zz`, `%ED%A0%80`, which is no UTF-8) made Fastify's
 * router answer by itself, on every surface: its own JSON (`FST_ERR_BAD_URL`), without the surface's error shape, the
 * request id or an access-log line. Such a path is routed with its `%` taken literally, so that it reaches the
 * surface it names, whose error handler then renders `targetProblem`'s 400.
 */

/** RFC 9112 §3.2 / RFC 3986 §3.2.2: `host[:port]`, a registered name or an IP literal, nothing else (no userinfo). */
const HOST_SYNTAX =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

export const isHostValue = (value: string): boolean => HOST_SYNTAX.test(value);

/** `http://authority/path?query` (RFC 9110 §4.2: the http and https schemes, case-insensitive): authority, rest. */
const ABSOLUTE_FORM = /^https?:\/\/([^/?#]*)(.*)$/i;

/**
 * The origin-form of `request`'s target, its Host made the target's when it came in absolute-form. A target that is
 * neither (`ftp://…`, userinfo in the authority, which RFC 9110 §4.2.4 says to treat as an error) is returned as it
 * came, for `targetProblem` to refuse.
 */
export function originForm(request: IncomingMessage): string {
  const target = request.url ?? '/';
  const routed = routedTarget(request, target);
  if (routed !== target) sentTargets.set(request, target);
  return routed;
}

function routedTarget(request: IncomingMessage, target: string): string {
  if (target.charCodeAt(0) === 47 /* '/' */) return decodablePath(request, target);
  const absolute = ABSOLUTE_FORM.exec(target);
  if (!absolute || !isHostValue(absolute[1]!)) return target;
  request.headers.host = absolute[1]!;
  const rest = absolute[2]!;
  return decodablePath(request, rest.charCodeAt(0) === 47 ? rest : `/${rest}`);
}

/** A target's path, its query left out (the access line, a route lookup, the metrics listener). */
export const pathOf = (target: string): string => target.split('?', 1)[0]!;

/** A target's query, without its `?`; empty when it has none (the authorization endpoint, a form read from a query). */
export function queryOf(target: string): string {
  const i = target.indexOf('?');
  return i < 0 ? '' : target.slice(i + 1);
}

/** Targets as the client sent them, of the requests `originForm` routed as another (Fastify overwrites `url`). */
const sentTargets = new WeakMap<IncomingMessage, string>();

/** `request`'s target as the client sent it, when it was routed as another; for the access log. */
export const sentTarget = (request: IncomingMessage): string | undefined => sentTargets.get(request);

/** Requests whose path did not decode, as `originForm` found them, for `targetProblem`. */
const undecodable = new WeakSet<IncomingMessage>();

/** `target`, or, when its path's percent-encoding does not decode, the same with each `%` of the path as `%25`. */
function decodablePath(request: IncomingMessage, target: string): string {
  if (!target.includes('%')) return target; // nearly every request: one scan, nothing made
  const path = pathOf(target);
  try {
    decodeURIComponent(path);
    return target;
  } catch {
    undecodable.add(request);
    return path.replaceAll('%', '%25') + target.slice(path.length);
  }
}

/**
 * Why `request`'s target, after `originForm` (`target`), cannot be served (→ 400), or undefined. `*` passes for
 * OPTIONS only (RFC 9112 §3.2.4: a question about the server as a whole, which `isServerWideOptions` picks out).
 */
export function targetProblem(request: IncomingMessage, target: string): string | undefined {
  if (undecodable.has(request))
    return "The request target's path has a percent-encoding that does not decode to UTF-8 (RFC 3986 §2.1, §2.5)";
  if (target.charCodeAt(0) === 47) return undefined;
  if (target === '*')
    return request.method === 'OPTIONS'
      ? undefined
      : 'The request target * is for OPTIONS only (RFC 9112 §3.2.4)';
  return 'The request target must be a path or an absolute http(s) URI without userinfo (RFC 9112 §3.2)';
}

/**
 * `OPTIONS *`: RFC 9110 §9.3.7's "ping" of the server as a whole, which no route is about; answered 200 with no
 * content (and `Content-Length: 0`, as that section asks), where it was each surface's 404, or on the authorization
 * server a 405 naming the methods of a route that had matched `*`.
 */
export const isServerWideOptions = (target: string): boolean => target === '*';
