import { OAuthError, type OAuthErrorCode } from '../http/oauth-errors.js';
import { isClientIdSyntax } from './client-authentication.js';
import { Params } from '../web/form.js';
import { PageError } from '../web/html.js';
import type { ResolvedClient } from './clients/client.js';
import { isS256Challenge } from './pkce.js';
import { isLoopbackRedirect, matchRedirectUri } from './redirect-uri.js';
import type { KnownResource } from './resource-indicator.js';
import { parseScope } from './scope-parameter.js';

/**
 * The authorization request (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2) as a sequence of small checks, in the
 * order RFC 6749 §4.1.2.1 sets: first the client and its redirect URI, whose errors are shown as a page because the
 * redirect URI cannot be trusted yet; then everything else, whose errors go back to the client. Every check here is a
 * pure function of the parameters (and of the resolved client); only resolving the client touches the outside world.
 */

/** A validated authorization request. */
export interface AuthorizationRequest {
  client: ResolvedClient;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  resource: KnownResource;
  scopes: string[];
  /** The query string as received: the pages carry it so every step re-validates the whole request. */
  query: string;
}

/** Where an error of a request goes once its redirect URI is trusted. */
export interface RedirectTarget {
  redirectUri: string;
  state: string | undefined;
}

/** An error after the redirect URI is trusted: sent back to the client (RFC 6749 §4.1.2.1) with `iss` (RFC 9207). */
export class RedirectError extends Error {
  constructor(
    readonly target: RedirectTarget,
    readonly code: OAuthErrorCode,
    readonly description: string,
    /** Set for errors in the request itself, found before anyone decided anything (see `mayRedirectErrors`). */
    readonly requestOf?: ResolvedClient,
  ) {
    super(description);
  }
}

/** What validating a request needs from outside: the client registry and the resources tokens can be issued for. */
export interface RequestResolvers {
  resolveClient(clientId: string): Promise<ResolvedClient>;
  resolveResource(raw: string): KnownResource | undefined;
}

/** Validates a whole request: client and redirect URI (page errors), then the rest (redirect errors). */
export async function validateAuthorizationRequest(
  query: string,
  resolvers: RequestResolvers,
): Promise<AuthorizationRequest> {
  const params = new Params(new URLSearchParams(query));
  const client = await resolvers.resolveClient(checkClientId(params));
  const target = checkRedirectTarget(params, client);
  return { client, ...target, ...checkRequestParameters(params, client, target, resolvers), query };
}

/** RFC 6749 §4.1.2.1: a missing or repeated client_id is never redirected. */
export function checkClientId(params: Params): string {
  if (params.repeated('client_id'))
    throw new PageError(400, 'Invalid request', 'The client_id parameter is repeated.');
  const clientId = params.raw.get('client_id');
  if (!clientId) throw new PageError(400, 'Invalid request', 'The client_id parameter is missing.');
  if (!isClientIdSyntax(clientId))
    throw new PageError(400, 'Invalid request', 'The client_id parameter is not a client identifier.');
  return clientId;
}

/**
 * RFC 6749 §3.1.2.3: the redirect URI must be one the client registered (loopback ports excepted, RFC 8252 §7.3), and
 * may be omitted only when the client registered exactly one that is not loopback. A bad one is never redirected to.
 */
export function checkRedirectTarget(params: Params, client: ResolvedClient): RedirectTarget {
  if (params.repeated('redirect_uri'))
    throw new PageError(400, 'Invalid request', 'The redirect_uri parameter is repeated.');
  const sent = params.raw.get('redirect_uri') || undefined;
  const state = params.raw.get('state') ?? undefined;
  if (sent === undefined) {
    const only = client.redirectUris.length === 1 ? client.redirectUris[0] : undefined;
    if (!only || isLoopbackRedirect(only)) {
      throw new PageError(400, 'Invalid request', 'The redirect_uri parameter is missing.');
    }
    return { redirectUri: only, state };
  }
  if (!matchRedirectUri(client.redirectUris, sent)) {
    throw new PageError(
      400,
      'Invalid redirect URI',
      'The redirect_uri is not registered for this application, so you are not sent back to it.',
    );
  }
  return { redirectUri: sent, state };
}

/** The parameters checked once the redirect URI is trusted; each failure is a RedirectError to the client. */
export function checkRequestParameters(
  params: Params,
  client: ResolvedClient,
  target: RedirectTarget,
  resolvers: Pick<RequestResolvers, 'resolveResource'>,
): Pick<AuthorizationRequest, 'codeChallenge' | 'resource' | 'scopes'> {
  try {
    checkResponseType(params);
    params.get('state'); // RFC 6749 §3.1: not repeated either
    const codeChallenge = checkPkce(params);
    const resource = checkResource(params, resolvers.resolveResource);
    const scopes = parseScope(params.get('scope'), resource.kind);
    return { codeChallenge, resource, scopes };
  } catch (e) {
    if (e instanceof OAuthError) throw new RedirectError(target, e.code, e.description, client);
    throw e;
  }
}

/** OAuth 2.1 §4.1.1: only the authorization code flow. */
export function checkResponseType(params: Params): void {
  const responseType = params.get('response_type');
  if (responseType === undefined) throw new OAuthError('invalid_request', 'response_type is missing');
  if (responseType !== 'code')
    throw new OAuthError('unsupported_response_type', 'Only response_type=code is supported');
}

/** RFC 7636 §4.4.1 and OAuth 2.1 §7.5.2: PKCE is mandatory, S256 only. Returns the challenge. */
export function checkPkce(params: Params): string {
  const challenge = params.get('code_challenge');
  if (challenge === undefined)
    throw new OAuthError('invalid_request', 'code_challenge is required (PKCE with S256)');
  const method = params.get('code_challenge_method');
  if (method === undefined)
    throw new OAuthError('invalid_request', 'code_challenge_method is required and must be S256');
  if (method !== 'S256')
    throw new OAuthError('invalid_request', `code_challenge_method ${method} is not supported; use S256`);
  if (!isS256Challenge(challenge))
    throw new OAuthError('invalid_request', 'code_challenge is not a valid S256 challenge');
  return challenge;
}

/** RFC 8707 §2: the resource is mandatory here (docs/contract.md#the-oauth-flow), exactly one, and one of ours. */
export function checkResource(
  params: Params,
  resolveResource: RequestResolvers['resolveResource'],
): KnownResource {
  const resources = params.all('resource');
  if (resources.length === 0 || resources[0] === '')
    throw new OAuthError('invalid_target', 'resource is required');
  if (resources.length > 1) throw new OAuthError('invalid_target', 'Send exactly one resource');
  const resource = resolveResource(resources[0]!);
  if (!resource)
    throw new OAuthError('invalid_target', 'The resource is not one this server issues tokens for');
  return resource;
}
