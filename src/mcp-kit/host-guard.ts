import { validateHostHeader, validateOriginHeader } from '@modelcontextprotocol/server';
import type { Config } from '../config/config.js';
import { isHostValue } from '../http/request-target.js';

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
  return isHostValue(hosts[0]!) ? undefined : 'The Host header is not a valid host[:port]';
}

/** How many accepted Host values a host remembers: its names with the ports clients reach it on. */
const REMEMBERED_HOSTS = 64;

/**
 * The Host check of one MCP host: why a request's Host is refused (compared without its port), or undefined. Agents
 * send the same Host on every request, and parsing it as a URL cost ~1.5 µs each time, so the values accepted are
 * remembered; only accepted ones, and at most `REMEMBERED_HOSTS`, so a client sending foreign or varied Hosts neither
 * grows the memo nor gets past it.
 */
export function hostCheck(
  allowed: () => readonly string[],
): (host: string | undefined) => string | undefined {
  const accepted = new Set<string>();
  return (host) => {
    if (host !== undefined && accepted.has(host)) return undefined;
    const result = validateHostHeader(host, allowed() as string[]);
    if (!result.ok) return result.message;
    if (accepted.size < REMEMBERED_HOSTS) accepted.add(host!);
    return undefined;
  };
}

/**
 * Why a request's Origin is refused, or undefined: an absent Origin passes (non-browser clients send none), any other
 * must name an allowed host.
 */
export function originProblem(
  origin: string | string[] | undefined,
  allowed: readonly string[],
): string | undefined {
  if (Array.isArray(origin)) return 'Send at most one Origin header';
  const result = validateOriginHeader(origin, allowed as string[]);
  return result.ok ? undefined : result.message;
}
