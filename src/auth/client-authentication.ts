import type { FastifyRequest } from 'fastify';
import { urls } from '../context.js';
import type { Config } from '../config/config.js';
import type { Params } from '../web/form.js';
import { OAuthError } from '../http/oauth-errors.js';

/**
 * Client authentication (RFC 6749 §2.3) as this server has it: public clients only
 * (`token_endpoint_auth_methods_supported` is `["none"]`, RFC 8414 §2), so presented credentials are refused, never
 * ignored: a client that believes it holds a secret learns at once that it does not. Used by every endpoint that takes
 * a client_id: token and revocation (the token exchange authenticates its internal client separately).
 */
export function refuseClientCredentials(ctx: { config: Config }, request: FastifyRequest, p: Params): void {
  const authorization = request.headers.authorization;
  if (presentsClientCredentials(authorization, p)) {
    // RFC 6749 §5.2: a client that tried the Authorization header gets 401 with a challenge of its scheme.
    const scheme = authorization?.split(' ')[0]?.replace(/[^A-Za-z0-9_-]/g, '') || undefined;
    throw new OAuthError(
      'invalid_client',
      'This server has public clients only (token_endpoint_auth_method none); send client_id without credentials',
      401,
      scheme ? { 'www-authenticate': `${scheme} realm="${urls.issuer(ctx.config)}"` } : {},
    );
  }
}

/** Whether a request presents client credentials of any kind: an Authorization header, a secret or an assertion. */
export function presentsClientCredentials(authorization: string | undefined, p: Params): boolean {
  return authorization !== undefined || p.has('client_secret') || p.has('client_assertion');
}

/** RFC 6749 Appendix A.1: `client-id = *VSCHAR`, the printable ASCII characters and space (%x20-7E). */
const CLIENT_ID_SYNTAX = /^[\x20-\x7E]+$/;

/** Whether `clientId` has the syntax RFC 6749 gives a client identifier; anything else names no client here. */
export function isClientIdSyntax(clientId: string): boolean {
  return CLIENT_ID_SYNTAX.test(clientId);
}

/**
 * The request's `client_id` (token and revocation endpoints): missing, repeated, or with characters RFC 6749 does not
 * allow in one (a control character, non-ASCII) is `invalid_request` before any lookup sees it.
 */
export function requireClientId(p: Params): string {
  const clientId = p.require('client_id');
  if (!isClientIdSyntax(clientId)) {
    throw new OAuthError(
      'invalid_request',
      'The client_id parameter has characters a client identifier cannot have',
    );
  }
  return clientId;
}
