import type { FastifyInstance } from 'fastify';
import type { AppContext } from '../context.js';
import { servePublicDocuments } from '../http/public-documents.js';
import { urls } from '../context.js';
import { PKCE_METHODS } from './pkce.js';
import { scopesSupported } from '../domain/scopes.js';

/** RFC 8414 authorization server metadata, with every field of docs/contract.md#the-oauth-flow. */
export function authorizationServerMetadata(ctx: AppContext): Record<string, unknown> {
  const issuer = urls.issuer(ctx.config);
  return {
    issuer,
    authorization_endpoint: `${issuer}/oauth2/auth`,
    token_endpoint: `${issuer}/oauth/token`,
    registration_endpoint: `${issuer}/oauth/register`,
    revocation_endpoint: `${issuer}/oauth/revoke`,
    jwks_uri: `${issuer}/.well-known/jwks.json`,
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token'],
    code_challenge_methods_supported: [...PKCE_METHODS],
    token_endpoint_auth_methods_supported: ['none'],
    revocation_endpoint_auth_methods_supported: ['none'],
    scopes_supported: scopesSupported(ctx.config.oauth.userResources),
    client_id_metadata_document_supported: true,
    resource_indicators_supported: true,
    authorization_response_iss_parameter_supported: true,
    service_documentation: `${issuer}/dashboard`,
  };
}

export async function metadataRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const path = '/.well-known/oauth-authorization-server';
  servePublicDocuments(app, {
    [path]: () => ({
      path,
      contentType: 'application/json; charset=utf-8',
      body: JSON.stringify(authorizationServerMetadata(ctx)),
    }),
  });
}
