import { describe, expect, it } from 'vitest';
import {
  checkClientId,
  checkPkce,
  checkRedirectTarget,
  checkRequestParameters,
  checkResource,
  checkResponseType,
  RedirectError,
  validateAuthorizationRequest,
} from '../../src/auth/authorization-request.js';
import type { ResolvedClient } from '../../src/auth/clients/client.js';
import type { KnownResource } from '../../src/auth/resource-indicator.js';
import { OAuthError } from '../../src/http/oauth-errors.js';
import { Params } from '../../src/web/form.js';
import { PageError } from '../../src/web/html.js';

/** The checks of the authorization request as pure functions (RFC 6749 §4.1.1, RFC 7636 §4.3, RFC 8707 §2). */

const RESOURCE: KnownResource = { uri: 'https://mcp.example/mcp', kind: 'agency' };
const CLIENT: ResolvedClient = {
  clientId: 'c1',
  kind: 'dcr',
  name: 'Agent',
  clientUri: undefined,
  applicationType: 'native',
  redirectUris: ['http://127.0.0.1/callback', 'https://agent.example/cb'],
};
const CHALLENGE = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';
const GOOD = {
  client_id: 'c1',
  redirect_uri: 'https://agent.example/cb',
  response_type: 'code',
  code_challenge: CHALLENGE,
  code_challenge_method: 'S256',
  resource: RESOURCE.uri,
  scope: 'agency:mcp:read',
  state: 'st',
};
const params = (o: Record<string, string | string[] | undefined>) => {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) for (const x of v === undefined ? [] : [v].flat()) p.append(k, x);
  return new Params(p);
};
const resolveResource = (raw: string) => (raw === RESOURCE.uri ? RESOURCE : undefined);

function oauthCode(fn: () => unknown): string | undefined {
  try {
    fn();
  } catch (e) {
    if (e instanceof OAuthError) return e.code;
    throw e;
  }
  return undefined;
}

describe('client and redirect URI: errors are pages, never redirects (RFC 6749 §4.1.2.1)', () => {
  it('client_id missing or repeated', () => {
    expect(() => checkClientId(params({}))).toThrow(PageError);
    expect(() => checkClientId(params({ client_id: ['a', 'b'] }))).toThrow(/repeated/);
    expect(checkClientId(params({ client_id: 'c1' }))).toBe('c1');
  });

  it('redirect_uri must be registered; loopback matches on any port (RFC 8252 §7.3)', () => {
    expect(() => checkRedirectTarget(params({ redirect_uri: 'https://evil.example/cb' }), CLIENT)).toThrow(
      PageError,
    );
    expect(() => checkRedirectTarget(params({ redirect_uri: ['a', 'b'] }), CLIENT)).toThrow(/repeated/);
    expect(
      checkRedirectTarget(params({ redirect_uri: 'http://127.0.0.1:53121/callback', state: 's' }), CLIENT),
    ).toEqual({ redirectUri: 'http://127.0.0.1:53121/callback', state: 's' });
  });

  it('redirect_uri may be omitted only with exactly one registered, non-loopback URI (RFC 6749 §3.1.2.3)', () => {
    expect(() => checkRedirectTarget(params({}), CLIENT)).toThrow(/missing/);
    const one = { ...CLIENT, redirectUris: ['https://agent.example/cb'] };
    expect(checkRedirectTarget(params({}), one).redirectUri).toBe('https://agent.example/cb');
    const loopback = { ...CLIENT, redirectUris: ['http://localhost/cb'] };
    expect(() => checkRedirectTarget(params({}), loopback)).toThrow(/missing/);
  });
});

describe('the rest of the request: OAuth error codes, sent back to the client', () => {
  it('response_type: missing is invalid_request, anything but code is unsupported_response_type', () => {
    expect(oauthCode(() => checkResponseType(params({})))).toBe('invalid_request');
    expect(oauthCode(() => checkResponseType(params({ response_type: 'token' })))).toBe(
      'unsupported_response_type',
    );
    expect(oauthCode(() => checkResponseType(params({ response_type: ['code', 'code'] })))).toBe(
      'invalid_request',
    );
    expect(oauthCode(() => checkResponseType(params({ response_type: 'code' })))).toBeUndefined();
  });

  it('PKCE: mandatory, S256 only, well-formed (RFC 7636 §4.4.1)', () => {
    const pkce = (o: Record<string, string>) => oauthCode(() => checkPkce(params(o)));
    expect(pkce({})).toBe('invalid_request');
    expect(pkce({ code_challenge: CHALLENGE })).toBe('invalid_request');
    expect(pkce({ code_challenge: CHALLENGE, code_challenge_method: 'plain' })).toBe('invalid_request');
    expect(pkce({ code_challenge: 'short', code_challenge_method: 'S256' })).toBe('invalid_request');
    expect(checkPkce(params({ code_challenge: CHALLENGE, code_challenge_method: 'S256' }))).toBe(CHALLENGE);
  });

  it('resource: required, exactly one, one of ours (RFC 8707 §2)', () => {
    const target = (o: Record<string, string | string[]>) =>
      oauthCode(() => checkResource(params(o), resolveResource));
    expect(target({})).toBe('invalid_target');
    expect(target({ resource: '' })).toBe('invalid_target');
    expect(target({ resource: [RESOURCE.uri, RESOURCE.uri] })).toBe('invalid_target');
    expect(target({ resource: 'https://other.example/mcp' })).toBe('invalid_target');
    expect(checkResource(params({ resource: RESOURCE.uri }), resolveResource)).toBe(RESOURCE);
  });

  it('a failure becomes a RedirectError carrying the target, the code and the client', () => {
    const target = { redirectUri: GOOD.redirect_uri, state: 'st' };
    try {
      checkRequestParameters(params({ ...GOOD, scope: 'admin' }), CLIENT, target, { resolveResource });
      expect.unreachable();
    } catch (e) {
      expect(e).toBeInstanceOf(RedirectError);
      expect(e).toMatchObject({ code: 'invalid_scope', target, requestOf: CLIENT });
    }
  });

  it('a repeated state is invalid_request (RFC 6749 §3.1)', () => {
    const target = { redirectUri: GOOD.redirect_uri, state: 'st' };
    expect(() =>
      checkRequestParameters(params({ ...GOOD, state: ['a', 'b'] }), CLIENT, target, { resolveResource }),
    ).toThrow(expect.objectContaining({ code: 'invalid_request' }));
  });
});

describe('validateAuthorizationRequest', () => {
  const resolvers = { resolveClient: async () => CLIENT, resolveResource };

  it('a good request: scopes canonical, the query kept for the pages', async () => {
    const query = new URLSearchParams(GOOD).toString();
    const req = await validateAuthorizationRequest(query, resolvers);
    expect(req).toMatchObject({
      redirectUri: GOOD.redirect_uri,
      state: 'st',
      codeChallenge: CHALLENGE,
      resource: RESOURCE,
      scopes: ['agency:mcp:read'],
      query,
    });
  });

  it('checks the redirect URI before anything else of the request', async () => {
    const query = new URLSearchParams({ ...GOOD, redirect_uri: 'https://evil.example/', response_type: 'x' });
    await expect(validateAuthorizationRequest(query.toString(), resolvers)).rejects.toBeInstanceOf(PageError);
  });
});
