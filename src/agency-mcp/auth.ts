import type { AuthInfo } from '@modelcontextprotocol/server';
import type { FastifyRequest } from 'fastify';
import { SCOPES } from '../domain/scopes.js';
import type { AppContext } from '../context.js';
import { bearerChallenge } from '../http/bearer.js';
import { authenticateMcpRequest, McpAuthError, type McpAuthPolicy } from '../mcp-kit/auth.js';
import type { OAuthPrincipal } from '../tokens/verifier.js';

/**
 * Who may call the agency MCP server (docs/contract.md#authentication): only `at+jwt` access tokens from the issuer, for this resource,
 * bound to one agency, one member and one connection. Every refusal is the docs/contract.md#tokens challenge, byte for byte.
 */

/** The principal of an accepted token: an OAuth principal with its binding present. */
export type AgencyPrincipal = OAuthPrincipal & { connectionId: string; agencyId: string; memberId: string };

/** docs/contract.md#the-oauth-flow: `WWW-Authenticate: Bearer resource_metadata="<metadata_url>", scope="agency:mcp:read"`. */
export const unauthorizedChallenge = (metadataUrl: string): string =>
  `Bearer resource_metadata="${metadataUrl}", scope="${SCOPES.agencyRead}"`;

/** docs/contract.md#tokens: a write with a read-only token; the client re-authorizes once with both scopes (RFC 6750 §3.1). */
export const insufficientScopeChallenge = (metadataUrl: string): string =>
  bearerChallenge({
    error: 'insufficient_scope',
    scope: `${SCOPES.agencyRead} ${SCOPES.agencyWrite}`,
    resource_metadata: metadataUrl,
    error_description: 'This tool makes changes: authorize again with agency:mcp:write',
  });

export function agencyAuthPolicy(resource: string, metadataUrl: string): McpAuthPolicy {
  return {
    audience: resource,
    accept: ['oauth'],
    requiredScope: SCOPES.agencyRead,
    resourceMetadataUrl: metadataUrl,
    challengeScope: SCOPES.agencyRead,
  };
}

/** Verifies the bearer token; throws McpAuthError (401 with the exact SPEC challenge, or 403 for a missing read scope). */
export async function authenticateAgencyRequest(
  ctx: AppContext,
  request: FastifyRequest,
  policy: McpAuthPolicy,
): Promise<{ token: string; principal: AgencyPrincipal }> {
  let verified: Awaited<ReturnType<typeof authenticateMcpRequest>>;
  try {
    verified = await authenticateMcpRequest(ctx, request, policy);
  } catch (e) {
    if (e instanceof McpAuthError && e.status === 401) {
      throw unauthorized(policy.resourceMetadataUrl, e.oauthError, e.message);
    }
    throw e;
  }
  const p = verified.principal;
  if (p.kind !== 'oauth' || !p.connectionId || !p.agencyId || !p.memberId) {
    throw unauthorized(
      policy.resourceMetadataUrl,
      'invalid_token',
      'The access token is not bound to one agency and one member',
    );
  }
  return { token: verified.token, principal: p as AgencyPrincipal };
}

export function unauthorized(
  metadataUrl: string,
  oauthError: McpAuthError['oauthError'],
  message: string,
): McpAuthError {
  return new McpAuthError(401, oauthError, message, unauthorizedChallenge(metadataUrl));
}

/** What the agency server keeps per request in the SDK's pass-through `authInfo.extra`. */
export interface AgencyCall {
  principal: AgencyPrincipal;
  /** The exchanged dashboard API token (never the inbound token), set before tools/list and tools/call. */
  dashboardToken?: string;
  /** The effective permissions now, fetched for tools/list only. */
  permissions?: ReadonlySet<string>;
  /** For tools/call: the tool named in the request (the only one the per-request server needs to register). */
  calledTool?: string;
  /** Why the dashboard API refused the call (401: the grant has ended): the request is then answered 401. */
  refused?: string;
  /** Why the dashboard API could not serve the call (503: a dependency is down): the request is then answered 503. */
  unavailable?: string;
  /** What the call to the dashboard API threw (a bug, say): the request is then answered as that error is anywhere. */
  failed?: unknown;
  requestId: string;
}

export function toAgencyAuthInfo(
  token: string,
  principal: AgencyPrincipal,
  resource: URL,
  requestId: string,
): AuthInfo {
  return {
    token,
    clientId: principal.clientId,
    scopes: [...principal.scopes],
    resource,
    extra: { agency: { principal, requestId } satisfies AgencyCall },
  };
}

export function agencyCallOf(authInfo: AuthInfo | undefined): AgencyCall {
  const call = authInfo?.extra?.['agency'] as AgencyCall | undefined;
  if (!call) throw new Error('agency MCP handler reached without an authenticated caller');
  return call;
}
