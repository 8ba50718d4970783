import { authorizationServerMetadata } from '../auth/metadata.js';
import { SCOPES } from '../domain/scopes.js';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { ERROR_CATALOGUE } from '../http/errors.js';
import { protectedResourceMetadataUrl } from '../mcp-kit/protected-resource.js';
import type { Companion } from './document.js';

const ADVICE: Partial<Record<keyof typeof ERROR_CATALOGUE, string>> = {
  missing_token: 'Send `Authorization: Bearer <token>`.',
  invalid_authorization_header: 'Send exactly one `Authorization: Bearer <token>` header.',
  invalid_token: 'Get a new token; do not edit or reuse tokens across services.',
  token_expired: 'Sign in again (session) or refresh (OAuth).',
  token_revoked: 'The user signed out or disconnected you: sign in or authorize again.',
  wrong_audience: 'Use a token issued for this resource (the `resource` you asked for must be this URL).',
  invalid_credentials: 'Check the username and password; the message is the same for both on purpose.',
  insufficient_scope: 'Authorize again asking for the scope named in `WWW-Authenticate`.',
  rate_limited: 'Wait the `Retry-After` seconds, then retry.',
};

/** `/auth.md`: how an agent authenticates to each surface, with the live URLs and scopes, and what to do on errors. */
export function authMd(ctx: AppContext): Companion {
  const c = ctx.config;
  const as = authorizationServerMetadata(ctx) as Record<string, string>;
  const agency = urls.agencyMcpResource(c);
  const restErrors = Object.entries(ADVICE).map(
    ([code, advice]) =>
      `| ${ERROR_CATALOGUE[code as keyof typeof ERROR_CATALOGUE].status} | \`${code}\` | ${advice} |`,
  );
  const body = `# Authenticating to Svc agent access

Four hosts: the REST API \`${urls.api(c)}\`, the user MCP server \`${urls.mcpResource(c)}\`, the agency MCP server
\`${agency}\`, and the authorization server \`${as['issuer']}\` (the issuer of every token).

## Session tokens (REST API and user MCP server)

OAuth for the REST API and the user MCP server is not open yet; use a first-party session token.

1. \`POST ${as['issuer']}/api/sessions\` with \`Content-Type: application/json\` and \`{"username": "...", "password": "..."}\`.
2. The answer (201) is \`{"object": "session", "id": "ses_...", "token": "<JWT>", "expires_at": "<RFC 3339>"}\`.
   The token lives 30 days; keep it secret.
3. Send it as \`Authorization: Bearer <token>\` to \`GET ${urls.api(c)}/me\` or to the MCP endpoint \`${urls.mcpResource(c)}\`.
4. Sign out with \`DELETE ${as['issuer']}/api/sessions/current\` and the same header.

Wrong credentials answer 401 \`invalid_credentials\`; too many attempts answer 429 with \`Retry-After\`.
The user MCP server's protected-resource metadata is at \`${protectedResourceMetadataUrl(urls.mcpResource(c))}\`.

## OAuth 2.1 (agency MCP server)

The agency MCP server accepts only access tokens from \`${as['issuer']}\` for the resource \`${agency}\`, each bound to
one agency and one member. API keys, client secrets and cookies are not accepted.

1. **Discover.** Call \`${agency}\` without a token. The 401 carries
   \`WWW-Authenticate: Bearer resource_metadata="${protectedResourceMetadataUrl(agency)}", scope="${SCOPES.agencyRead}"\`.
   Fetch that document (RFC 9728), then the authorization-server metadata at
   \`${as['issuer']}/.well-known/oauth-authorization-server\` (RFC 8414).
2. **Register** (one of):
   - a Client ID Metadata Document: use an \`https://\` URL as \`client_id\`; it must serve JSON whose \`client_id\`
     equals that URL and which lists your \`redirect_uris\` (preferred, nothing to register);
   - dynamic registration: \`POST ${as['registration_endpoint']}\` with \`{"redirect_uris": [...],
     "token_endpoint_auth_method": "none"}\` (public clients only; rate limited, 429 with \`Retry-After\`);
   - a pre-registered identifier for well-known AI clients.
3. **Authorize.** Send the member to \`${as['authorization_endpoint']}\` with \`response_type=code\`, \`client_id\`,
   \`redirect_uri\`, \`code_challenge\` and \`code_challenge_method=S256\` (PKCE is mandatory), \`resource=${agency}\`
   (exactly), \`state\`, and \`scope\` from: \`${SCOPES.agencyRead}\`, \`${SCOPES.agencyWrite}\`, \`${SCOPES.offline}\`
   (\`mcp:read\` and \`mcp:write\` are accepted as aliases). The member signs in, picks the agency and chooses which of
   their permissions you may use. The redirect carries \`code\`, \`state\` and \`iss\` — check that \`iss\` is
   \`${as['issuer']}\` (RFC 9207). Codes live 60 seconds and work once.
4. **Token.** \`POST ${as['token_endpoint']}\` (form-encoded) with \`grant_type=authorization_code\`, \`code\`,
   \`code_verifier\`, \`redirect_uri\`, \`client_id\` (and optionally \`resource\`). You get a 1-hour access token and,
   with \`${SCOPES.offline}\`, a refresh token.
5. **Call.** \`Authorization: Bearer <access token>\` on every request to \`${agency}\`.
6. **Refresh.** \`grant_type=refresh_token\` at the same endpoint. Refresh tokens rotate on every use and slide to
   30 days; presenting an old one again revokes the whole connection — always keep the newest. Leave \`scope\` out to
   keep the grant's; a narrower one narrows the new access token only.
7. **Revoke.** \`POST ${as['revocation_endpoint']}\` with \`token=<refresh token>\` and \`client_id\`.

Token signatures verify with the keys at \`${as['jwks_uri']}\`.

## Errors and what to do

REST API (\`{"error": {"type", "code", "message", "request_id"}}\`; branch on \`code\`):

| status | code | what to do |
| --- | --- | --- |
${restErrors.join('\n')}

MCP servers answer 401 with \`WWW-Authenticate: Bearer resource_metadata="..."\` when the token is missing or
invalid: start the flow above again (agency) or sign in again (user). A write tool called with a read-only grant
answers 403 with \`error="insufficient_scope", scope="${SCOPES.agencyRead} ${SCOPES.agencyWrite}"\`: authorize once more with
both scopes. A tool the member did not allow answers a tool error naming the missing permission.

Token endpoint errors follow RFC 6749 §5.2: \`invalid_grant\` (the code or refresh token is expired, used or revoked:
start again at step 3), \`invalid_request\` (fix the named parameter), \`invalid_client\`, \`invalid_target\` (the
\`resource\` is not one this server issues tokens for), \`invalid_scope\` (a refresh asked for more than the grant
holds: leave \`scope\` out), \`unsupported_grant_type\`.
`;
  return { path: '/auth.md', contentType: 'text/markdown; charset=utf-8', body };
}
