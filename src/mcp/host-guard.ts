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
