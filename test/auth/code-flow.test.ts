import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { authorize, Browser, connect, connectionStatus, register } from './oauth-helpers.js';

/** oauth4webapi as a strict OAuth 2.1 client: discovery, DCR, PKCE, the `iss` check, code and refresh grants. */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
let server: TestServer;
let as: oauth.AuthorizationServer;
const insecure = { [oauth.allowInsecureRequests]: true };

beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_URL } });
  const issuer = new URL(server.url.auth);
  as = await oauth.processDiscoveryResponse(
    issuer,
    await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
  );
});
afterAll(() => server.close());

describe('oauth4webapi against the authorization server', () => {
  it('discovers RFC 8414 metadata with every field of docs/contract.md#the-oauth-flow', () => {
    expect(as).toMatchObject({
      issuer: server.url.auth,
      authorization_endpoint: `${server.url.auth}/oauth2/auth`,
      token_endpoint: `${server.url.auth}/oauth/token`,
      registration_endpoint: `${server.url.auth}/oauth/register`,
      revocation_endpoint: `${server.url.auth}/oauth/revoke`,
      jwks_uri: `${server.url.auth}/.well-known/jwks.json`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      client_id_metadata_document_supported: true,
      resource_indicators_supported: true,
      authorization_response_iss_parameter_supported: true,
    });
    expect(as.scopes_supported).toEqual(
      expect.arrayContaining([
        'agency:mcp:read',
        'agency:mcp:write',
        'offline_access',
        'mcp:read',
        'mcp:write',
      ]),
    );
  });

  it('registers, authorizes with PKCE, checks iss, exchanges the code, validates the RFC 9068 token, refreshes and revokes', async () => {
    const redirectUri = 'http://127.0.0.1:53682/callback';
    const registration = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(
        as,
        { redirect_uris: [redirectUri], token_endpoint_auth_method: 'none', client_name: 'oauth4webapi' },
        insecure,
      ),
    );
    const client: oauth.Client = { client_id: registration.client_id };
    const clientAuth = oauth.None();
    const resource = `${AGENCY_MCP_URL}/mcp`;

    const verifier = oauth.generateRandomCodeVerifier();
    const challenge = await oauth.calculatePKCECodeChallenge(verifier);
    const state = oauth.generateRandomState();
    const back = await authorize(
      server,
      new Browser(server.url.auth),
      { clientId: client.client_id, redirectUri, scope: 'agency:mcp:read offline_access', state },
      challenge,
    );
    // RFC 9207: validateAuthResponse refuses a response without the right iss when the metadata announces it.
    const params = oauth.validateAuthResponse(as, client, back, state);
    const tokenResponse = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(as, client, clientAuth, params, redirectUri, verifier, {
        additionalParameters: { resource },
        ...insecure,
      }),
    );
    expect(tokenResponse.token_type).toBe('bearer');
    expect(tokenResponse.expires_in).toBe(3600);
    expect(tokenResponse.scope).toBe('agency:mcp:read offline_access');
    expect(typeof tokenResponse.refresh_token).toBe('string');

    const claims = await oauth.validateJwtAccessToken(
      as,
      new Request(resource, { headers: { authorization: `Bearer ${tokenResponse.access_token}` } }),
      resource,
      insecure,
    );
    expect(claims).toMatchObject({ iss: server.url.auth, aud: resource, client_id: client.client_id });
    expect(claims['agency_id']).toMatch(/^agy_/);
    expect(claims['member_id']).toMatch(/^mem_/);
    expect(claims['cid']).toMatch(/^con_/);
    expect(claims.exp - claims.iat).toBe(3600);

    const refreshed = await oauth.processRefreshTokenResponse(
      as,
      client,
      await oauth.refreshTokenGrantRequest(as, client, clientAuth, tokenResponse.refresh_token!, insecure),
    );
    expect(refreshed.refresh_token).not.toBe(tokenResponse.refresh_token);
    expect(refreshed.access_token).not.toBe(tokenResponse.access_token);

    await oauth.processRevocationResponse(
      await oauth.revocationRequest(as, client, clientAuth, refreshed.refresh_token!, insecure),
    );
    expect((await connectionStatus(server, refreshed.access_token)).status).toBe('revoked');
    await expect(
      oauth.processRefreshTokenResponse(
        as,
        client,
        await oauth.refreshTokenGrantRequest(as, client, clientAuth, refreshed.refresh_token!, insecure),
      ),
    ).rejects.toMatchObject({ error: 'invalid_grant' });
  });

  it('a pre-registered client (data file) completes the flow on a loopback redirect with any port', async () => {
    const client: oauth.Client = { client_id: 'claude-code' };
    const redirectUri = 'http://localhost:61234/callback';
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const back = await authorize(
      server,
      new Browser(server.url.auth),
      { clientId: client.client_id, redirectUri, state },
      await oauth.calculatePKCECodeChallenge(verifier),
    );
    const params = oauth.validateAuthResponse(as, client, back, state);
    const res = await oauth.processAuthorizationCodeResponse(
      as,
      client,
      await oauth.authorizationCodeGrantRequest(
        as,
        client,
        oauth.None(),
        params,
        redirectUri,
        verifier,
        insecure,
      ),
    );
    expect(res.scope).toBe('agency:mcp:read');
    expect(res.refresh_token).toBeUndefined();
  });

  it('DCR is idempotent: the same metadata gives the same client_id', async () => {
    const meta = {
      redirect_uris: ['https://agent.example/cb'],
      client_name: 'Same',
      token_endpoint_auth_method: 'none',
    };
    const a = await register(server, meta);
    const b = await register(server, { ...meta });
    expect(a.res.status).toBe(201);
    expect(b.body['client_id']).toBe(a.body['client_id']);
  });
});

describe('access tokens signed with ES256 (SIGNING_ALG=ES256)', () => {
  it('are RFC 9068 tokens that oauth4webapi and the resource-server verifier accept', async () => {
    const es = await startTestServer({ env: { AGENCY_MCP_URL, SIGNING_ALG: 'ES256' } });
    try {
      const issuer = new URL(es.url.auth);
      const meta = await oauth.processDiscoveryResponse(
        issuer,
        await oauth.discoveryRequest(issuer, { algorithm: 'oauth2', ...insecure }),
      );
      const { tokens } = await connect(es);
      const resource = `${AGENCY_MCP_URL}/mcp`;
      const claims = await oauth.validateJwtAccessToken(
        meta,
        new Request(resource, { headers: { authorization: `Bearer ${tokens['access_token']}` } }),
        resource,
        insecure,
      );
      expect(claims['cid']).toMatch(/^con_/);
      const p = await es.services.ctx.verifier.verify(tokens['access_token']!, resource, ['oauth']);
      expect(p.kind).toBe('oauth');
    } finally {
      await es.close();
    }
  });
});
