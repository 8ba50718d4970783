import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomSecret, safeEqual } from '../web/secrets.js';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { sessionKindOf } from '../domain/sessions.js';
import { TokenError } from '../tokens/verifier.js';
import { PageError } from '../web/html.js';

/**
 * The browser side of sign-in: a session cookie holding the first-party session token (the `sid` it names must be
 * live), and CSRF protection by a double-submitted random token plus an Origin check. Cookies are HttpOnly,
 * SameSite=Lax, and Secure with the `__Host-` prefix when AUTH_URL is https.
 */

const isHttps = (ctx: AppContext) => urls.issuer(ctx.config).startsWith('https://');
const cookieName = (ctx: AppContext, base: string) => (isHttps(ctx) ? `__Host-${base}` : base);

/** The service's own cookie values: session JWTs and CSRF tokens, all base64url with dots; nothing to decode. */
const OWN_COOKIE_VALUE = /^[A-Za-z0-9._-]{1,4096}$/;

/**
 * The service's own cookies of a request. Other sites' cookies on the same host (analytics and the like) are never
 * decoded, so a malformed one (`_ga=GA1.1.100%`) cannot break a page; a value of ours in another shape is ignored.
 */
export function readCookies(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (!OWN_COOKIES.has(k) || k in out || !OWN_COOKIE_VALUE.test(v)) continue;
    out[k] = v;
  }
  return out;
}

const OWN_COOKIES = new Set(['svc_session', 'svc_csrf', '__Host-svc_session', '__Host-svc_csrf']);

function setCookie(ctx: AppContext, reply: FastifyReply, name: string, value: string, maxAgeSeconds: number) {
  const attrs = [
    `${cookieName(ctx, name)}=${encodeURIComponent(value)}`,
    'Path=/',
    'HttpOnly',
    'SameSite=Lax',
    `Max-Age=${maxAgeSeconds}`,
  ];
  if (isHttps(ctx)) attrs.push('Secure');
  const prev = reply.getHeader('set-cookie');
  const list = Array.isArray(prev) ? prev : prev ? [String(prev)] : [];
  reply.header('set-cookie', [...list, attrs.join('; ')]);
}

export interface WebUser {
  userId: string;
  sessionId: string;
}

/**
 * The signed-in user of this browser, or undefined. Only a browser session opens the pages: an API session token put
 * in the cookie (what a program holding one would try) is refused, whatever its audience.
 */
export async function currentUser(ctx: AppContext, request: FastifyRequest): Promise<WebUser | undefined> {
  const token = readCookies(request)[cookieName(ctx, 'svc_session')];
  if (!token) return undefined;
  try {
    const p = await ctx.verifier.verify(token, urls.issuer(ctx.config), ['session']);
    if (p.kind !== 'session' || sessionKindOf(p.sessionId) !== 'browser') return undefined;
    return { userId: p.userId, sessionId: p.sessionId };
  } catch (e) {
    if (e instanceof TokenError) return undefined;
    throw e;
  }
}

export function setSessionCookie(ctx: AppContext, reply: FastifyReply, token: string): void {
  setCookie(ctx, reply, 'svc_session', token, ctx.config.sessionTtlSeconds);
}

export function clearSessionCookie(ctx: AppContext, reply: FastifyReply): void {
  setCookie(ctx, reply, 'svc_session', '', 0);
}

const CSRF_SHAPE = /^[A-Za-z0-9_-]{43}$/;

/** The CSRF token of this browser, set as a cookie when it has none; forms carry it in a hidden `csrf` field. */
export function csrfToken(ctx: AppContext, request: FastifyRequest, reply: FastifyReply): string {
  const existing = readCookies(request)[cookieName(ctx, 'svc_csrf')];
  if (existing && CSRF_SHAPE.test(existing)) return existing;
  const fresh = randomSecret();
  setCookie(ctx, reply, 'svc_csrf', fresh, 24 * 3600);
  return fresh;
}

/** Refuses a form post whose CSRF token does not match the cookie, or that comes from another origin. */
export function checkCsrf(ctx: AppContext, request: FastifyRequest, form: URLSearchParams): void {
  const origin = request.headers.origin;
  if (origin !== undefined && origin !== new URL(urls.issuer(ctx.config)).origin) {
    throw new PageError(403, 'Request refused', 'This form was sent from another site.');
  }
  const cookie = readCookies(request)[cookieName(ctx, 'svc_csrf')];
  const sent = form.getAll('csrf');
  if (!cookie || sent.length !== 1 || !safeEqual(cookie, sent[0]!)) {
    throw new PageError(
      403,
      'Request refused',
      'The form has expired. Go back, reload the page and try again.',
    );
  }
}

/**
 * A path on this origin to return to after sign-in, or the fallback: no open redirect. `next` is resolved the way a
 * browser resolves a Location (the WHATWG URL parser drops tabs and newlines and reads `\\` as `/`, so `/\t/evil` and
 * `/\\evil` are other hosts) and kept only when it stays on the origin; it is answered in its parsed, percent-encoded
 * form, so no control character or non-ASCII character reaches a header.
 */
export function safeNext(next: unknown, fallback = '/dashboard'): string {
  if (typeof next !== 'string' || !next.startsWith('/') || next.length > 2048) return fallback;
  let resolved: URL;
  try {
    resolved = new URL(next, SAME_ORIGIN_PROBE);
  } catch {
    return fallback;
  }
  if (resolved.origin !== SAME_ORIGIN_PROBE) return fallback;
  const path = `${resolved.pathname}${resolved.search}`;
  return path.startsWith('//') ? fallback : path;
}

/** Any origin of our own will do to see whether a relative reference leaves it. */
const SAME_ORIGIN_PROBE = 'https://as.invalid';
