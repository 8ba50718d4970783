import type { FastifyRequest } from 'fastify';
import type { Principal, TokenKind, TokenVerifier } from '../tokens/verifier.js';
import { TokenError } from '../tokens/verifier.js';
import { BearerError, type BearerFailure, bearerChallenge, extractBearer, rfc6750Error } from './bearer.js';
import { ApiError, type ErrorCode } from './errors.js';

const CODES: Record<BearerFailure, ErrorCode> = {
  missing: 'missing_token',
  invalid_request: 'invalid_authorization_header',
  malformed: 'invalid_token',
  invalid: 'invalid_token',
  not_yet_valid: 'invalid_token',
  expired: 'token_expired',
  revoked: 'token_revoked',
  wrong_audience: 'wrong_audience',
};

export interface RestAuthOptions {
  /** This resource's identifier: the token's `aud` must contain it. */
  audience: string;
  accept: readonly TokenKind[];
  /** Scope an OAuth token must carry (docs/contract.md#authentication: scopes apply to OAuth tokens only). */
  scope?: string;
}

/**
 * Authenticates a REST request by its bearer token. Failures become 401 errors with an RFC 6750 challenge; an OAuth
 * token without the operation's scope becomes 403 `insufficient_scope` (RFC 6750 §3.1).
 */
export async function authenticateRest(
  ctx: { verifier: Pick<TokenVerifier, 'verify'> },
  request: FastifyRequest,
  o: RestAuthOptions,
): Promise<Principal> {
  let principal: Principal;
  try {
    principal = await ctx.verifier.verify(extractBearer(request.raw), o.audience, o.accept);
  } catch (e) {
    if (!(e instanceof BearerError || e instanceof TokenError)) throw e;
    throw authenticationError(e.failure, e.message, o.audience);
  }
  if (o.scope && principal.kind === 'oauth' && !principal.scopes.has(o.scope)) {
    throw new ApiError('insufficient_scope', `This operation needs the ${o.scope} scope`, {
      headers: {
        'www-authenticate': bearerChallenge({
          realm: o.audience,
          error: 'insufficient_scope',
          scope: o.scope,
        }),
      },
    });
  }
  return principal;
}

/** A 401 in the REST shape with its RFC 6750 challenge. */
export function authenticationError(failure: BearerFailure, message: string, realm: string): ApiError {
  const error = rfc6750Error(failure);
  return new ApiError(CODES[failure], message, {
    headers: { 'www-authenticate': bearerChallenge({ realm, error, error_description: error && message }) },
  });
}
