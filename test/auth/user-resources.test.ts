import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { authorize, Browser, connect, pkce, register } from './oauth-helpers.js';
import { claimsOf } from '../helpers/tokens.js';

/** OAUTH_USER_RESOURCES=on: `user:read` tokens for BASE_URL and {MCP_URL}/mcp (docs/contract.md#authentication keeps it off by default). */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
const REDIRECT = 'http://127.0.0.1:9999/callback';
let on: TestServer;
let off: TestServer;

beforeAll(async () => {
  [on, off] = await Promise.all([
    startTestServer({ env: { AGENCY_MCP_URL, OAUTH_USER_RESOURCES: 'on' } }),
    startTestServer({ env: { AGENCY_MCP_URL } }),
  ]);
});
afterAll(() => Promise.all([on.close(), off.close()]));

/** A registered client that has completed a flow: its request errors are redirected to it (not shown as a page). */
async function usedClient(server: TestServer): Promise<string> {
  const clientId = (await register(server, { redirect_uris: [REDIRECT] })).body['client_id'] as string;
  await connect(server, { clientId, redirectUri: REDIRECT });
  return clientId;
}

describe(`OAuth for the user resources (${ENGINE})`, () => {
  it('on: a user:read token for the REST API reads GET /me; the connection row governs it', async () => {
    const { tokens } = await connect(on, { resource: on.url.api, scope: 'user:read offline_access' });
    expect(tokens['scope']).toBe('user:read offline_access');
    const claims = claimsOf(tokens['access_token']!);
    expect(claims.aud).toBe(on.url.api);
    expect(claims.agency_id).toBeUndefined();
    const me = await fetch(`${on.url.api}/me`, {
      headers: { authorization: `Bearer ${tokens['access_token']}` },
    });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { username: string }).username).toBe('ada');
  });

  it('on: the user MCP resource is accepted too', async () => {
    const { tokens } = await connect(on, { resource: `${on.url.mcp}/mcp`, scope: 'user:read' });
    const p = await on.services.ctx.verifier.verify(tokens['access_token']!, `${on.url.mcp}/mcp`, ['oauth']);
    expect(p.kind === 'oauth' && p.scopes.has('user:read')).toBe(true);
  });

  it('on: agency scopes are refused for a user resource', async () => {
    const clientId = await usedClient(on);
    const back = await authorize(
      on,
      new Browser(on.url.auth),
      { clientId, redirectUri: REDIRECT, resource: on.url.api, scope: 'agency:mcp:read' },
      pkce().challenge,
    );
    expect(back.searchParams.get('error')).toBe('invalid_scope');
  });

  it('off (default): the user resources get invalid_target', async () => {
    const clientId = await usedClient(off);
    for (const resource of [off.url.api, `${off.url.mcp}/mcp`]) {
      const back = await authorize(
        off,
        new Browser(off.url.auth),
        { clientId, redirectUri: REDIRECT, resource, scope: 'user:read' },
        pkce().challenge,
      );
      expect(back.searchParams.get('error')).toBe('invalid_target');
    }
  });

  it('on: a user-level grant is listed under Connected apps and Disconnect ends it', async () => {
    const browser = new Browser(on.url.auth);
    const clientId = (await register(on, { redirect_uris: [REDIRECT], client_name: 'Profile Reader' })).body[
      'client_id'
    ] as string;
    const { tokens } = await connect(on, {
      clientId,
      redirectUri: REDIRECT,
      browser,
      resource: on.url.api,
      scope: 'user:read offline_access',
    });
    const me = () =>
      fetch(`${on.url.api}/me`, { headers: { authorization: `Bearer ${tokens['access_token']}` } });
    expect((await me()).status).toBe(200);
    const page = await (await browser.get('/dashboard')).text();
    const account = /<section aria-labelledby="apps-account">[\s\S]*?<\/section>/.exec(page)?.[0] ?? '';
    expect(account).toContain('<h2 id="apps-account">Your account</h2>');
    expect(account).toContain('Profile Reader');
    expect(account).toContain('It may: read your user profile');
    const id =
      /action="\/dashboard\/connections\/(con_[A-Za-z0-9]+)\/disconnect">(?:(?!<\/li>)[\s\S])*?Disconnect Profile Reader/.exec(
        account,
      )?.[1];
    expect(id).toBeDefined();
    expect(
      (await browser.post(`/dashboard/connections/${id}/disconnect`, { csrf: browser.csrf })).status,
    ).toBe(303);
    expect((await me()).status).toBe(401);
  });
});
