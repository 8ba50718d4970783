import type { AuthInfo } from '@modelcontextprotocol/server';
import type { FastifyRequest } from 'fastify';
import {
  BearerError,
  type BearerFailure,
  bearerChallenge,
  extractBearer,
  rfc6750Error,
} from '../http/bearer.js';
import { type Principal, TokenError, type TokenKind, type TokenVerifier } from '../tokens/verifier.js';

/** How an MCP resource server checks the bearer token before any MCP processing (MCP authorization spec §2.6). */
export interface McpAuthPolicy {
  /** This resource's identifier; the token's `aud` must contain it (RFC 8707, RFC 9068 §4). */
  audience: string;
  accept: readonly TokenKind[];
  /** Scope an OAuth token must carry; session tokens carry none (docs/contract.md#authentication). */
  requiredScope: string | undefined;
  /** RFC 9728 metadata URL, advertised in every challenge (RFC 9728 §5.1). */
  resourceMetadataUrl: string;
  /** The `scope` auth-param of 401 challenges, when the resource wants to tell clients what to ask for. */
  challengeScope?: string;
}

/** An authentication or authorization refusal, answered as HTTP 401/403 before the request reaches the MCP layer. */
export class McpAuthError extends Error {
  override name = 'McpAuthError';
  constructor(
    readonly status: 401 | 403,
    readonly oauthError: 'invalid_request' | 'invalid_token' | 'insufficient_scope' | undefined,
    message: string,
    readonly challenge: string,
  ) {
    super(message);
  }

  /** OAuth-style error body (RFC 6750 §3.1 codes); `error` is left out when the request had no credentials (§3.1). */
  body(requestId: string): Record<string, string> {
    return {
      ...(this.oauthError ? { error: this.oauthError } : {}),
      error_description: this.message,
      request_id: requestId,
    };
  }
}

/** Who called, as the MCP handlers see it: the verified principal, carried in the SDK's pass-through `authInfo`. */
export interface McpCaller {
  principal: Principal;
  /**
   * Set by a handler that failed (`{ failed }`: a dependency outage, PostgreSQL or SQLite's lock, say, or a bug): the
   * endpoint then answers the error as it does on the fast path (503 with Retry-After, or 500 and the error logged),
   * where the SDK would send a tool error (HTTP 200) or `-32603` with the error's own words.
   */
  interruption?: Interruption;
}

/**
 * Why a request under way is answered otherwise than with its result: the grant behind the token ended (maybe on
 * another instance: 401 with the challenge), a dependency it needed is down (503 with Retry-After, the reason as the
 * agency's dashboard API gave it), or a handler threw (`failed`: answered as that error is everywhere, classified).
 */
export type Interruption = { refused: McpAuthError } | { unavailable: string } | { failed: unknown };

/** Verifies the request's bearer token for this resource; throws McpAuthError with the RFC 6750 challenge. */
export async function authenticateMcpRequest(
  ctx: { verifier: Pick<TokenVerifier, 'verify'> },
  request: FastifyRequest,
  policy: McpAuthPolicy,
): Promise<{ token: string; principal: Principal }> {
  let token: string;
  let principal: Principal;
  try {
    token = extractBearer(request.raw);
    principal = await ctx.verifier.verify(token, policy.audience, policy.accept);
  } catch (e) {
    if (!(e instanceof BearerError || e instanceof TokenError)) throw e;
    throw unauthenticated(policy, e.failure, e.message);
  }
  assertScope(policy, principal);
  return { token, principal };
}

/** 401 with `WWW-Authenticate: Bearer resource_metadata=...` (RFC 9728 §5.1) and the RFC 6750 §3 error, if any. */
export function unauthenticated(
  policy: McpAuthPolicy,
  failure: BearerFailure,
  message: string,
): McpAuthError {
  const error = rfc6750Error(failure);
  const challenge = bearerChallenge({
    resource_metadata: policy.resourceMetadataUrl,
    scope: policy.challengeScope,
    error,
    error_description: error && message,
  });
  return new McpAuthError(401, error ?? undefined, message, challenge);
}

/** RFC 6750 §3.1 `insufficient_scope`: 403 naming the scope the resource needs. */
function assertScope(policy: McpAuthPolicy, principal: Principal): void {
  const scope = policy.requiredScope;
  if (!scope || principal.kind !== 'oauth' || principal.scopes.has(scope)) return;
  const message = `This resource needs the ${scope} scope`;
  const challenge = bearerChallenge({
    resource_metadata: policy.resourceMetadataUrl,
    error: 'insufficient_scope',
    scope,
    error_description: message,
  });
  throw new McpAuthError(403, 'insufficient_scope', message, challenge);
}

/** The SDK's pass-through auth record (never derived by the SDK from headers) carrying our principal. */
export function toAuthInfo(token: string, principal: Principal, resource: URL): AuthInfo {
  return {
    token,
    clientId: principal.kind === 'oauth' ? principal.clientId : 'first-party-session',
    scopes: principal.kind === 'oauth' ? [...principal.scopes] : [],
    resource,
    extra: { caller: { principal } satisfies McpCaller },
  };
}

/** The caller stamped by `toAuthInfo`; handlers only run after authentication, so its absence is a wiring bug. */
export function callerOf(authInfo: AuthInfo | undefined): McpCaller {
  const caller = authInfo?.extra?.['caller'] as McpCaller | undefined;
  if (!caller) throw new Error('MCP handler reached without an authenticated caller');
  return caller;
}
