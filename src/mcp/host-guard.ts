import { validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import type { Config } from '../config/config.js';

/** Loopback names a local client may use outside production (MCP transports §Security Warning: bind and check). */
const LOOPBACK_HOSTNAMES = ['localhost', '127.0.0.1', '[::1]'];

/**
 * The hostnames an MCP host answers to: the host of its public URL, plus the loopback names outside production.
 * MCP 2025-11-25 / 2026-07-28 transports, "Security Warning": servers MUST validate the Origin header, and SHOULD
 * check Host against DNS rebinding.
 */
export function allowedHostnames(config: Config, publicUrl: string): readonly string[] {
  const publicHost = new URL(publicUrl).hostname;
  return config.production ? [publicHost] : [...new Set([publicHost, ...LOOPBACK_HOSTNAMES])];
}

/** RFC 9112 §3.2 / RFC 3986 §3.2.2: `host[:port]`, a registered name or an IP literal, nothing else (no userinfo). */
const HOST_SYNTAX =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]+\])(?::\d{1,5})?$/;

/**
 * Why a request's Host header is malformed (→ 400, RFC 9112 §3.2: "a server MUST respond with a 400 (Bad Request)
 * status code to any HTTP/1.1 request message that lacks a Host header field and to any request message that contains
 * more than one Host header field line or a Host header field with an invalid field value"), or undefined.
 */
export function malformedHost(rawHeaders: readonly string[]): string | undefined {
  const hosts: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2)
    if (rawHeaders[i]!.toLowerCase() === 'host') hosts.push(rawHeaders[i + 1]!);
  if (hosts.length !== 1) return 'Send exactly one Host header';
  return HOST_SYNTAX.test(hosts[0]!) ? undefined : 'The Host header is not a valid host[:port]';
}

/**
 * Why a request's Host or Origin is refused, or undefined when both are acceptable. Host is compared without its
 * port; an absent Origin passes (non-browser clients send none), any other Origin must name an allowed host.
 */
export function hostOrOriginProblem(
  headers: { host?: string | undefined; origin?: string | string[] | undefined },
  allowed: readonly string[],
): string | undefined {
  const list = allowed as string[];
  const host = validateHostHeader(headers.host, list);
  if (!host.ok) return host.message;
  if (Array.isArray(headers.origin)) return 'Send at most one Origin header';
  const origin = validateOriginHeader(headers.origin, list);
  return origin.ok ? undefined : origin.message;
}
