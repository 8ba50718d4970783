import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addMember } from '../../src/domain/agencies.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { claimsOf, signWithServerKey } from '../helpers/tokens.js';
import {
  agencyIds,
  authorize,
  authorizeQuery,
  Browser,
  connect,
  connectionStatus,
  type FlowOptions,
  hidden,
  pkce,
  register,
  token,
} from './oauth-helpers.js';

/** Named negative cases of the authorization request, run on the engine TEST_DATABASE selects. */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
const RESOURCE = `${AGENCY_MCP_URL}/mcp`;
const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;
let clientId: string;
let ada: Browser;

beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_URL, DCR_LIMIT_PER_IP: '1000' } });
  clientId = (
    await register(server, { redirect_uris: [REDIRECT, 'https://agent.example/cb'], client_name: 'Neg' })
  ).body['client_id'] as string;
  ada = new Browser(server.url.auth);
  await ada.signIn('ada');
});
afterAll(() => server.close());

const opts = (o: Partial<FlowOptions> = {}): FlowOptions => ({ clientId, redirectUri: REDIRECT, ...o });

/** GET /oauth2/auth with a raw query; returns the response. */
const authRaw = (query: URLSearchParams | string, browser = ada) => browser.get(`/oauth2/auth?${query}`);

/** Asserts an error page: 4xx HTML, never a redirect. */
async function expectErrorPage(res: Response, text: RegExp) {
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.status).toBeLessThan(500);
  expect(res.headers.get('location')).toBeNull();
  expect(res.headers.get('content-type')).toContain('text/html');
  expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
  expect(await res.text()).toMatch(text);
}

/** Asserts an error redirect to the client with error, state and iss (RFC 6749 §4.1.2.1, RFC 9207). */
function expectErrorRedirect(res: Response, error: string, state = 'st-123') {
  expect(res.status).toBe(302);
  const to = new URL(res.headers.get('location')!);
  expect(`${to.origin}${to.pathname}`).toBe(REDIRECT);
  expect(to.searchParams.get('error')).toBe(error);
  expect(to.searchParams.get('error_description')).toBeTruthy();
  expect(to.searchParams.get('state')).toBe(state);
  expect(to.searchParams.get('iss')).toBe(server.url.auth);
  expect(to.searchParams.has('code')).toBe(false);
}

const query = (o: Partial<FlowOptions> = {}, challenge = pkce().challenge) =>
  authorizeQuery(server, opts(o), challenge);

describe(`authorization endpoint: errors shown as a page, never redirected (${ENGINE})`, () => {
  it('unknown client_id', async () => {
    await expectErrorPage(await authRaw(query({ clientId: 'no-such-client' })), /not known/);
  });
  it('missing client_id', async () => {
    const q = query();
    q.delete('client_id');
    await expectErrorPage(await authRaw(q), /client_id parameter is missing/);
  });
  it.each([
    ['a control character', 'test\u0000agent'],
    ['a line break', 'test\nagent'],
    ['non-ASCII', 'tést-agent'],
  ])('a client_id with %s (RFC 6749 A.1: VSCHAR only)', async (_, bad) => {
    await expectErrorPage(await authRaw(query({ clientId: bad })), /not a client identifier/);
  });
  it('repeated client_id', async () => {
    const q = query();
    q.append('client_id', clientId);
    await expectErrorPage(await authRaw(q), /repeated/);
  });
  it('an unregistered redirect URI is shown as an error page, never redirected', async () => {
    await expectErrorPage(await authRaw(query({ redirectUri: 'https://evil.example/cb' })), /not registered/);
  });
  it('redirect URI mismatch: another path on the loopback host', async () => {
    await expectErrorPage(
      await authRaw(query({ redirectUri: 'http://127.0.0.1:9999/other' })),
      /not registered/,
    );
  });
  it('redirect URI mismatch: an https URI differing by a trailing slash', async () => {
    await expectErrorPage(
      await authRaw(query({ redirectUri: 'https://agent.example/cb/' })),
      /not registered/,
    );
  });
  it('redirect URI missing when the client registered more than one', async () => {
    const q = query();
    q.delete('redirect_uri');
    await expectErrorPage(await authRaw(q), /redirect_uri parameter is missing/);
  });
});

describe(`authorization endpoint: errors redirected with error, state and iss (${ENGINE})`, () => {
  // Errors are redirected only to a client that has been used before, for a signed-in member (see the next block).
  beforeAll(async () => {
    await connect(server, { clientId, redirectUri: REDIRECT, browser: ada });
  });
  it('response_type=token → unsupported_response_type', async () => {
    const q = query();
    q.set('response_type', 'token');
    expectErrorRedirect(await authRaw(q), 'unsupported_response_type');
  });
  it('response_type missing → invalid_request', async () => {
    const q = query();
    q.delete('response_type');
    expectErrorRedirect(await authRaw(q), 'invalid_request');
  });
  it('PKCE missing → invalid_request', async () => {
    const q = query();
    q.delete('code_challenge');
    q.delete('code_challenge_method');
    expectErrorRedirect(await authRaw(q), 'invalid_request');
  });
  it('PKCE plain → invalid_request', async () => {
    const q = query();
    q.set('code_challenge_method', 'plain');
    expectErrorRedirect(await authRaw(q), 'invalid_request');
  });
  it('PKCE method missing (the RFC 7636 default would be plain) → invalid_request', async () => {
    const q = query();
    q.delete('code_challenge_method');
    expectErrorRedirect(await authRaw(q), 'invalid_request');
  });
  it('malformed code_challenge → invalid_request', async () => {
    expectErrorRedirect(await authRaw(query({}, 'short')), 'invalid_request');
  });
  it('resource missing → invalid_target', async () => {
    expectErrorRedirect(await authRaw(query({ resource: undefined })), 'invalid_target');
  });
  it('resource different (the REST API while OAUTH_USER_RESOURCES is off) → invalid_target', async () => {
    expectErrorRedirect(await authRaw(query({ resource: server.url.api })), 'invalid_target');
  });
  it('resource with a trailing slash → invalid_target', async () => {
    expectErrorRedirect(await authRaw(query({ resource: `${RESOURCE}/` })), 'invalid_target');
  });
  it('resource with a fragment → invalid_target', async () => {
    expectErrorRedirect(await authRaw(query({ resource: `${RESOURCE}#x` })), 'invalid_target');
  });
  it('two resources → invalid_target', async () => {
    const q = query();
    q.append('resource', RESOURCE);
    expectErrorRedirect(await authRaw(q), 'invalid_target');
  });
  it('unknown scope → invalid_scope', async () => {
    expectErrorRedirect(await authRaw(query({ scope: 'agency:mcp:read admin' })), 'invalid_scope');
  });
  it('a scope of another resource (user:read for the agency MCP server) → invalid_scope', async () => {
    expectErrorRedirect(await authRaw(query({ scope: 'user:read' })), 'invalid_scope');
  });
  it('repeated scope → invalid_request', async () => {
    const q = query({ scope: 'agency:mcp:read' });
    q.append('scope', 'agency:mcp:write');
    expectErrorRedirect(await authRaw(q), 'invalid_request');
  });
  it('Deny → access_denied', async () => {
    const back = await authorize(server, ada, opts(), pkce().challenge, 'deny');
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('iss')).toBe(server.url.auth);
    expect(back.searchParams.get('state')).toBe('st-123');
  });
});

describe(`open redirection through a fresh self-registered client: its errors are a page (${ENGINE})`, () => {
  let fresh: string;
  beforeAll(async () => {
    fresh = (await register(server, { redirect_uris: ['https://attacker.example/cb'], client_name: 'Fresh' }))
      .body['client_id'] as string;
  });
  const bad = (o: Record<string, string>) => {
    const q = authorizeQuery(
      server,
      { clientId: fresh, redirectUri: 'https://attacker.example/cb', resource: RESOURCE },
      pkce().challenge,
    );
    for (const [k, v] of Object.entries(o)) {
      if (v === '') q.delete(k);
      else q.set(k, v);
    }
    return q;
  };
  it('response_type=token from a client never used → a page, no redirect to the registered URL', async () => {
    await expectErrorPage(await authRaw(bad({ response_type: 'token' })), /unsupported_response_type/);
  });
  it('PKCE missing from a client never used → a page', async () => {
    await expectErrorPage(await authRaw(bad({ code_challenge: '' })), /code_challenge/);
  });
  it('before anyone signed in, even a used client gets a page', async () => {
    const q = query();
    q.set('response_type', 'token');
    await expectErrorPage(await authRaw(q, new Browser(server.url.auth)), /unsupported_response_type/);
  });
});

describe(`resource indicators and scopes that are accepted (${ENGINE})`, () => {
  it('resource with an upper-case scheme and host is accepted (canonical comparison)', async () => {
    const upper = RESOURCE.replace('http://127.0.0.1', 'HTTP://127.0.0.1');
    const { tokens } = await connect(server, {
      clientId,
      redirectUri: REDIRECT,
      browser: ada,
      resource: upper,
    });
    expect(claimsOf(tokens['access_token']!)['aud']).toBe(RESOURCE);
  });
  it('mcp:read / mcp:write aliases are accepted and tokens carry the canonical names', async () => {
    const { tokens } = await connect(server, {
      clientId,
      redirectUri: REDIRECT,
      browser: ada,
      scope: 'mcp:read mcp:write',
    });
    expect(tokens['scope']).toBe('agency:mcp:read agency:mcp:write');
  });
  it('no scope → read access by default', async () => {
    const { tokens } = await connect(server, {
      clientId,
      redirectUri: REDIRECT,
      browser: ada,
      scope: undefined,
    });
    expect(tokens['scope']).toBe('agency:mcp:read');
  });
});

describe(`consent: the ceiling and write access (${ENGINE})`, () => {
  async function consentPage(browser: Browser, o: Partial<FlowOptions>, agency = 'Northwind Studio') {
    const res = await authRaw(query(o), browser);
    let page = await res.text();
    if (page.includes('type="radio"')) {
      const id = (await agencyIds(server))[agency]!;
      page = await (
        await browser.get(
          `/oauth2/auth/consent?${new URLSearchParams({ request: hidden(page, 'request'), agency_id: id })}`,
        )
      ).text();
    }
    return page;
  }

  it('write is not offered to a viewer, and the token carries no write scope', async () => {
    const linus = new Browser(server.url.auth);
    await linus.signIn('linus');
    const page = await consentPage(linus, { scope: 'agency:mcp:read agency:mcp:write' });
    expect(page).toMatch(/your role \(viewer\) cannot make changes/);
    expect(page).not.toMatch(/value="(tasks|clients|projects|notes):write"/);
    const { tokens } = await connect(server, {
      clientId,
      redirectUri: REDIRECT,
      browser: linus,
      scope: 'agency:mcp:read agency:mcp:write',
    });
    expect(tokens['scope']).toBe('agency:mcp:read');
  });

  it('write is not offered where the agency disallows agent write (Blue Harbor), even to a manager', async () => {
    const db = server.services.ctx.db;
    const grace = await db
      .selectFrom('users')
      .select('id')
      .where('username', '=', 'grace')
      .executeTakeFirstOrThrow();
    await addMember(db, server.clock, {
      agencyId: (await agencyIds(server))['Blue Harbor']!,
      userId: grace.id,
      role: 'manager',
    });
    const browser = new Browser(server.url.auth);
    await browser.signIn('grace');
    const page = await consentPage(browser, { scope: 'agency:mcp:write' }, 'Blue Harbor');
    // The agency's name isolated, as every name inside a sentence is (web/html.ts, `isolated`).
    expect(page).toMatch(/<bdi>Blue Harbor<\/bdi> does not allow agents to make changes/);
    expect(page).not.toMatch(/value="tasks:write"/);
    expect(page).toMatch(/value="tasks:read"/);
  });

  it('write is offered to the owner where the agency allows it', async () => {
    const page = await consentPage(ada, { scope: 'agency:mcp:write' });
    expect(page).toMatch(/value="clients:write"/);
  });

  it('a ceiling permission that was not offered is refused', async () => {
    const linus = new Browser(server.url.auth);
    await linus.signIn('linus');
    await expect(
      authorize(
        server,
        linus,
        opts({ scope: 'agency:mcp:write', ceiling: ['tasks:read', 'tasks:write'] }),
        pkce().challenge,
      ),
    ).rejects.toThrow(/consent: 400/);
  });

  it('the consent form without its CSRF token is refused', async () => {
    const page = await consentPage(ada, {});
    const res = await ada.post('/oauth2/auth/consent', {
      request: hidden(page, 'request'),
      agency_id: hidden(page, 'agency_id'),
      decision: 'allow',
      ceiling: 'tasks:read',
    });
    await expectErrorPage(res, /form has expired/);
  });

  it('the consent form from another origin is refused', async () => {
    const page = await consentPage(ada, {});
    const res = await ada.post(
      '/oauth2/auth/consent',
      {
        csrf: ada.csrf,
        request: hidden(page, 'request'),
        agency_id: hidden(page, 'agency_id'),
        decision: 'allow',
      },
      { origin: 'https://evil.example' },
    );
    await expectErrorPage(res, /another site/);
  });

  it('an agency the user is not a member of is refused', async () => {
    const linus = new Browser(server.url.auth);
    await linus.signIn('linus');
    const res = await authRaw(query(), linus);
    const page = await res.text();
    // linus has one agency, so he goes straight to consent; asking for Blue Harbor is refused.
    const other = (await agencyIds(server))['Blue Harbor']!;
    const r2 = await linus.get(
      `/oauth2/auth/consent?${new URLSearchParams({ request: hidden(page, 'request'), agency_id: other })}`,
    );
    await expectErrorPage(r2, /not an active member/);
  });
});

describe(`token endpoint (${ENGINE})`, () => {
  async function code(o: Partial<FlowOptions> = {}) {
    const { verifier, challenge } = pkce();
    const back = await authorize(
      server,
      ada,
      opts({ scope: 'agency:mcp:read offline_access', ...o }),
      challenge,
    );
    return { code: back.searchParams.get('code')!, verifier };
  }
  const exchange = (c: { code: string; verifier: string }, extra: Record<string, string> = {}) =>
    token(server, {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
      redirect_uri: REDIRECT,
      client_id: clientId,
      ...extra,
    });

  it('wrong PKCE verifier → invalid_grant', async () => {
    const c = await code();
    const { res, body } = await exchange({ ...c, verifier: pkce().verifier });
    expect(res.status).toBe(400);
    expect(body['error']).toBe('invalid_grant');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });
  it('missing code_verifier → invalid_request', async () => {
    const c = await code();
    const { body } = await token(server, {
      grant_type: 'authorization_code',
      code: c.code,
      redirect_uri: REDIRECT,
      client_id: clientId,
    });
    expect(body['error']).toBe('invalid_request');
  });
  it('code replay → invalid_grant and the connection it produced is revoked', async () => {
    const c = await code();
    const first = await exchange(c);
    expect(first.res.status).toBe(200);
    const second = await exchange(c);
    expect(second.body['error']).toBe('invalid_grant');
    const ended = await connectionStatus(server, first.body['access_token']!);
    expect(ended.revoke_reason).toBe('code_replay');
    // One event for the one ending, of the attack's own type (the history says it once).
    const events = await server.services.ctx.db
      .selectFrom('audit_events')
      .select('type')
      .where('connection_id', '=', ended.id)
      .where('type', '!=', 'connection.created')
      .execute();
    expect(events.map((e) => e.type)).toEqual(['connection.code_replay_detected']);
    await expect(
      server.services.ctx.verifier.verify(first.body['access_token']!, RESOURCE, ['oauth']),
    ).rejects.toMatchObject({ failure: 'revoked' });
    const refresh = await token(server, {
      grant_type: 'refresh_token',
      refresh_token: first.body['refresh_token']!,
      client_id: clientId,
    });
    expect(refresh.body['error']).toBe('invalid_grant');
  });
  it("a used code replayed by another client_id does not end the victim's connection", async () => {
    const c = await code();
    const first = await exchange(c);
    const attack = await exchange(c, { client_id: 'claude-code' });
    expect(attack.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, first.body['access_token']!)).status).toBe('active');
  });
  it("a used code replayed without its verifier does not end the victim's connection", async () => {
    const c = await code();
    const first = await exchange(c);
    const attack = await exchange({ ...c, verifier: pkce().verifier });
    expect(attack.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, first.body['access_token']!)).status).toBe('active');
  });
  it('concurrent exchanges of one code → exactly one success', async () => {
    const c = await code();
    const results = await Promise.all(Array.from({ length: 5 }, () => exchange(c)));
    expect(results.filter((r) => r.res.status === 200)).toHaveLength(1);
  });
  it('code after 61 s → invalid_grant', async () => {
    const c = await code();
    server.clock.advance(61_000);
    const { body } = await exchange(c);
    expect(body['error']).toBe('invalid_grant');
    expect(body['error_description']).toMatch(/expired/);
  });
  it('redirect_uri mismatch at the token endpoint → invalid_grant', async () => {
    const { body } = await exchange(await code(), { redirect_uri: 'https://agent.example/cb' });
    expect(body['error']).toBe('invalid_grant');
  });
  it('another client_id → invalid_grant', async () => {
    const { body } = await exchange(await code(), { client_id: 'claude-code' });
    expect(body['error']).toBe('invalid_grant');
  });
  it('missing client_id → invalid_request', async () => {
    const c = await code();
    const { body } = await token(server, {
      grant_type: 'authorization_code',
      code: c.code,
      code_verifier: c.verifier,
    });
    expect(body['error']).toBe('invalid_request');
  });
  it('resource different at the token endpoint → invalid_target', async () => {
    const { body } = await exchange(await code(), { resource: server.url.api });
    expect(body['error']).toBe('invalid_target');
  });
  it('an unknown code → invalid_grant', async () => {
    const { body } = await exchange({ code: 'nope', verifier: pkce().verifier });
    expect(body['error']).toBe('invalid_grant');
  });
  it('unsupported grant_type → unsupported_grant_type', async () => {
    const { body } = await token(server, { grant_type: 'password', username: 'ada', password: 'x' });
    expect(body['error']).toBe('unsupported_grant_type');
  });
  it('missing grant_type → invalid_request', async () => {
    const { body } = await token(server, { code: 'x' });
    expect(body['error']).toBe('invalid_request');
  });
  it('client_secret (client authentication) → 401 invalid_client', async () => {
    const { res, body } = await exchange(await code(), { client_secret: 'x' });
    expect(res.status).toBe(401);
    expect(body['error']).toBe('invalid_client');
  });
  it('HTTP Basic client authentication → 401 invalid_client', async () => {
    const c = await code();
    const { res, body } = await token(
      server,
      { grant_type: 'authorization_code', code: c.code, code_verifier: c.verifier, client_id: clientId },
      { authorization: `Basic ${Buffer.from(`${clientId}:x`).toString('base64')}` },
    );
    expect(res.status).toBe(401);
    expect(body['error']).toBe('invalid_client');
  });
  it('a JSON body → invalid_request', async () => {
    const res = await fetch(`${server.url.auth}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'authorization_code' }),
    });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });
  it('a repeated parameter → invalid_request', async () => {
    const res = await fetch(`${server.url.auth}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=refresh_token&refresh_token=a&refresh_token=b&client_id=x',
    });
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });
});

describe(`refresh tokens (${ENGINE})`, () => {
  const refresh = (rt: string, extra: Record<string, string> = {}) =>
    token(server, { grant_type: 'refresh_token', refresh_token: rt, client_id: clientId, ...extra });
  const fresh = (o: Partial<FlowOptions> = {}) =>
    connect(server, { clientId, redirectUri: REDIRECT, browser: ada, ...o });

  it('rotates on every use and slides the connection expiry', async () => {
    const { tokens } = await fresh();
    server.clock.advance(3600_000);
    const a = await refresh(tokens['refresh_token']!);
    expect(a.res.status).toBe(200);
    expect(a.res.headers.get('cache-control')).toBe('no-store');
    expect(a.body['refresh_token']).not.toBe(tokens['refresh_token']);
    const conn = await connectionStatus(server, a.body['access_token']!);
    expect(conn.expires_at).toBe(server.clock.now() + 30 * 24 * 3600_000);
  });
  it('expired refresh tokens are pruned; rotated ones that have not expired are kept for reuse detection', async () => {
    const { tokens } = await fresh();
    const a = await refresh(tokens['refresh_token']!);
    const rows = () =>
      server.services.ctx.db.selectFrom('refresh_tokens').select(['hash', 'expires_at']).execute();
    const before = await rows();
    expect(before.length).toBeGreaterThanOrEqual(2);
    server.clock.advance(31 * 24 * 3600_000);
    // Any refresh (here an unknown token) prunes at most once an hour per process.
    await refresh('unknown-token');
    const after = await rows();
    expect(after.every((r) => r.expires_at >= server.clock.now() - 3600_000)).toBe(true);
    expect(after.length).toBeLessThan(before.length);
    expect((await refresh(a.body['refresh_token']!)).body['error']).toBe('invalid_grant');
  });
  it('reuse of a rotated token after the reuse window → invalid_grant and the whole connection is revoked', async () => {
    const { tokens } = await fresh();
    const a = await refresh(tokens['refresh_token']!);
    server.clock.advance((server.config.oauth.refreshReuseGraceSeconds + 1) * 1000);
    const reuse = await refresh(tokens['refresh_token']!);
    expect(reuse.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, a.body['access_token']!)).revoke_reason).toBe('refresh_reuse');
    // The successor dies with the connection.
    expect((await refresh(a.body['refresh_token']!)).body['error']).toBe('invalid_grant');
    const events = await server.services.ctx.db
      .selectFrom('audit_events')
      .select('type')
      .where('type', '=', 'connection.refresh_reuse_detected')
      .execute();
    expect(events.length).toBeGreaterThan(0);
  });
  it('10 concurrent refreshes of one token → one rotation: every answer carries the same successor', async () => {
    const { tokens } = await fresh();
    const results = await Promise.all(Array.from({ length: 10 }, () => refresh(tokens['refresh_token']!)));
    expect(results.filter((r) => r.res.status === 200)).toHaveLength(10);
    expect(new Set(results.map((r) => r.body['refresh_token'])).size).toBe(1);
    expect((await refresh(results[0]!.body['refresh_token']!)).res.status).toBe(200);
  });
  it('another client_id → invalid_grant (and the connection survives)', async () => {
    const { tokens } = await fresh();
    expect((await refresh(tokens['refresh_token']!, { client_id: 'claude-code' })).body['error']).toBe(
      'invalid_grant',
    );
    expect((await refresh(tokens['refresh_token']!)).res.status).toBe(200);
  });
  it('a wider scope → invalid_scope; a narrower one is granted', async () => {
    const { tokens } = await fresh();
    expect((await refresh(tokens['refresh_token']!, { scope: 'agency:mcp:write' })).body['error']).toBe(
      'invalid_scope',
    );
    const narrow = await refresh(tokens['refresh_token']!, { scope: 'agency:mcp:read' });
    expect(narrow.body['scope']).toBe('agency:mcp:read');
  });
  it('the scope of a refresh is read as the authorization request reads it: aliases, write with its read, offline_access alone with the default', async () => {
    // Many OAuth clients send the scope they first asked for with every refresh. The agency MCP server needs
    // agency:mcp:read on every call, so a token of `agency:mcp:write` alone would be refused all its hour.
    const { tokens } = await fresh({ scope: 'mcp:write offline_access' });
    expect(tokens['scope']).toBe('agency:mcp:read agency:mcp:write offline_access');
    let rt = tokens['refresh_token']!;
    for (const [asked, granted] of [
      ['mcp:write offline_access', 'agency:mcp:read agency:mcp:write offline_access'],
      ['agency:mcp:write', 'agency:mcp:read agency:mcp:write'],
      ['offline_access', 'agency:mcp:read offline_access'],
      ['offline_access mcp:read', 'agency:mcp:read offline_access'],
    ] as const) {
      const res = await refresh(rt, { scope: asked });
      expect(res.res.status, asked).toBe(200);
      expect(res.body['scope'], asked).toBe(granted);
      expect(claimsOf(res.body['access_token']!)['scope'], asked).toBe(granted);
      rt = res.body['refresh_token']!;
    }
    for (const [asked, description] of [
      ['user:read', 'The scope user:read is unknown or not valid for this resource'],
      ['agency:mcp:read "x', 'The scope parameter is malformed'],
    ] as const) {
      const res = await refresh(rt, { scope: asked });
      expect(res.body, asked).toMatchObject({ error: 'invalid_scope', error_description: description });
    }
  });
  it('after 30 days unused → invalid_grant', async () => {
    const { tokens } = await fresh();
    server.clock.advance(31 * 24 * 3600_000);
    expect((await refresh(tokens['refresh_token']!)).body['error']).toBe('invalid_grant');
  });
  it('an unknown refresh token → invalid_grant', async () => {
    expect((await refresh('not-a-token')).body['error']).toBe('invalid_grant');
  });
});

describe(`revocation (${ENGINE})`, () => {
  const revoke = (params: Record<string, string>) =>
    fetch(`${server.url.auth}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(params).toString(),
    });
  it('revoke of an unknown token → 200', async () => {
    expect((await revoke({ token: 'unknown', client_id: clientId })).status).toBe(200);
  });
  it('revoke without a token → invalid_request', async () => {
    const res = await revoke({ client_id: clientId });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
  });
  it("another client's token is not revoked (and the answer is still 200)", async () => {
    const { tokens } = await connect(server, { clientId, redirectUri: REDIRECT, browser: ada });
    expect((await revoke({ token: tokens['refresh_token']!, client_id: 'claude-code' })).status).toBe(200);
    expect((await connectionStatus(server, tokens['access_token']!)).status).toBe('active');
  });
});

describe(`dynamic client registration (${ENGINE})`, () => {
  it('token_endpoint_auth_method client_secret_basic or _post → registered as a public client (none), no secret', async () => {
    for (const method of ['client_secret_basic', 'client_secret_post']) {
      const { res, body } = await register(server, {
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: method,
      });
      expect(res.status).toBe(201);
      expect(body['token_endpoint_auth_method']).toBe('none');
      expect(body).not.toHaveProperty('client_secret');
      // The host goes on as a public client: the whole flow works without a secret.
      const connected = await connect(server, {
        clientId: body['client_id'] as string,
        redirectUri: REDIRECT,
        browser: ada,
      });
      expect(connected.tokens['access_token']).toBeTruthy();
    }
  });
  it('scope: the values this server grants are registered and answered, the others left out (RFC 7591 §3.2.1)', async () => {
    const asked = async (scope: string) =>
      (await register(server, { redirect_uris: [REDIRECT], scope })).body as Record<string, unknown>;
    expect((await asked('openid mcp:read admin offline_access mcp:read'))['scope']).toBe(
      'mcp:read offline_access',
    );
    expect(await asked('openid profile')).not.toHaveProperty('scope');
    // What is stored is what was answered.
    const answered = await asked('agency:mcp:write admin');
    const row = await server.services.ctx.db
      .selectFrom('oauth_clients')
      .select('metadata')
      .where('client_id', '=', String(answered['client_id']))
      .executeTakeFirstOrThrow();
    expect((JSON.parse(row.metadata) as Record<string, unknown>)['scope']).toBe('agency:mcp:write');
    expect(answered['scope']).toBe('agency:mcp:write');
  });
  it('token_endpoint_auth_method private_key_jwt → 400 invalid_client_metadata', async () => {
    const { res, body } = await register(server, {
      redirect_uris: [REDIRECT],
      token_endpoint_auth_method: 'private_key_jwt',
    });
    expect(res.status).toBe(400);
    expect(body['error']).toBe('invalid_client_metadata');
  });
  it('no redirect_uris → invalid_redirect_uri', async () => {
    expect((await register(server, { client_name: 'x' })).body['error']).toBe('invalid_redirect_uri');
  });
  it('redirect_uris not an array → invalid_redirect_uri saying what it takes', async () => {
    expect((await register(server, { redirect_uris: REDIRECT })).body).toMatchObject({
      error: 'invalid_redirect_uri',
      error_description: 'redirect_uris: expected array, received string',
    });
  });
  it('http on a non-loopback host → invalid_redirect_uri', async () => {
    expect((await register(server, { redirect_uris: ['http://agent.example/cb'] })).body['error']).toBe(
      'invalid_redirect_uri',
    );
  });
  it('a redirect URI with a fragment → invalid_redirect_uri', async () => {
    expect((await register(server, { redirect_uris: ['https://agent.example/cb#x'] })).body['error']).toBe(
      'invalid_redirect_uri',
    );
  });
  it('a private-use scheme needs application_type native (and a reverse domain name)', async () => {
    expect((await register(server, { redirect_uris: ['com.example.agent:/cb'] })).body['error']).toBe(
      'invalid_redirect_uri',
    );
    expect(
      (await register(server, { redirect_uris: ['agent:/cb'], application_type: 'native' })).body['error'],
    ).toBe('invalid_redirect_uri');
    const ok = await register(server, {
      redirect_uris: ['com.example.agent:/cb'],
      application_type: 'native',
    });
    expect(ok.res.status).toBe(201);
    expect(ok.body).toMatchObject({ application_type: 'native', token_endpoint_auth_method: 'none' });
  });
  it('javascript: redirect → invalid_redirect_uri', async () => {
    expect(
      (await register(server, { redirect_uris: ['javascript:alert(1)'], application_type: 'native' })).body[
        'error'
      ],
    ).toBe('invalid_redirect_uri');
  });
  it('unsupported grant type → invalid_client_metadata', async () => {
    expect(
      (await register(server, { redirect_uris: [REDIRECT], grant_types: ['client_credentials'] })).body[
        'error'
      ],
    ).toBe('invalid_client_metadata');
  });
  it('not JSON object → invalid_client_metadata', async () => {
    expect((await register(server, [] as unknown as Record<string, unknown>)).body['error']).toBe(
      'invalid_client_metadata',
    );
  });
});

describe(`DCR rate limit and cap (${ENGINE})`, () => {
  let small: TestServer;
  beforeAll(async () => {
    small = await startTestServer({
      env: { AGENCY_MCP_URL, DCR_LIMIT_PER_IP: '3', DCR_MAX_CLIENTS: '2' },
      seed: false,
    });
  });
  afterAll(() => small.close());

  it('the cap prunes the oldest never-used client; the rate limit answers 429 with Retry-After', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      small.clock.advance(1000);
      const { res, body } = await register(small, { redirect_uris: [`https://a${i}.example/cb`] });
      expect(res.status).toBe(201);
      ids.push(body['client_id'] as string);
    }
    const rows = await small.services.ctx.db
      .selectFrom('oauth_clients')
      .select('client_id')
      .where('kind', '=', 'dcr')
      .execute();
    expect(rows.map((r) => r.client_id).sort()).toEqual([ids[1], ids[2]].sort());
    const { res, body } = await register(small, { redirect_uris: ['https://a9.example/cb'] });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(body['error']).toBeTruthy();
  });
});

describe(`sign-in page (${ENGINE})`, () => {
  it('a wrong password shows the page again with 401', async () => {
    const b = new Browser(server.url.auth);
    await b.get('/sign-in');
    const res = await b.post('/sign-in', {
      csrf: b.csrf,
      username: 'ada',
      password: 'wrong-password',
      next: '/dashboard',
    });
    expect(res.status).toBe(401);
    expect(await res.text()).toMatch(/incorrect/);
    expect(b.cookies.has('svc_session')).toBe(false);
  });
  it('the sign-in form without CSRF token is refused', async () => {
    const b = new Browser(server.url.auth);
    const res = await b.post('/sign-in', { username: 'ada', password: 'ada-demo-password' });
    expect(res.status).toBe(403);
  });
  it('next may not leave the site (no open redirect)', async () => {
    const b = new Browser(server.url.auth);
    await b.get('/sign-in');
    const res = await b.post('/sign-in', {
      csrf: b.csrf,
      username: 'ada',
      password: 'ada-demo-password',
      next: '//evil.example/',
    });
    expect(res.headers.get('location')).toBe('/dashboard');
  });
  it('cookies are HttpOnly and SameSite=Lax', async () => {
    const b = new Browser(server.url.auth);
    const res = await b.get('/sign-in');
    const cookie = res.headers.getSetCookie().join('\n');
    expect(cookie).toMatch(/HttpOnly/);
    expect(cookie).toMatch(/SameSite=Lax/);
  });
});

describe(`refresh reuse grace window (REFRESH_REUSE_GRACE_SECONDS=10) (${ENGINE})`, () => {
  let grace: TestServer;
  let graceClient: string;
  beforeAll(async () => {
    grace = await startTestServer({ env: { AGENCY_MCP_URL, REFRESH_REUSE_GRACE_SECONDS: '10' } });
    graceClient = (await register(grace, { redirect_uris: [REDIRECT] })).body['client_id'] as string;
  });
  afterAll(() => grace.close());
  const refresh = (rt: string, extra: Record<string, string> = {}) =>
    token(grace, { grant_type: 'refresh_token', refresh_token: rt, client_id: graceClient, ...extra });

  it('the immediately previous token within the window gets the same successor', async () => {
    const { tokens } = await connect(grace, { clientId: graceClient, redirectUri: REDIRECT });
    const a = await refresh(tokens['refresh_token']!);
    grace.clock.advance(5_000);
    const again = await refresh(tokens['refresh_token']!);
    expect(again.res.status).toBe(200);
    expect(again.body['refresh_token']).toBe(a.body['refresh_token']);
    expect((await connectionStatus(grace, a.body['access_token']!)).status).toBe('active');
  });
  it('a retry within the window that asks for a narrower scope gets that scope, as the first answer did', async () => {
    const { tokens } = await connect(grace, { clientId: graceClient, redirectUri: REDIRECT });
    const narrower = { scope: 'agency:mcp:read' };
    const a = await refresh(tokens['refresh_token']!, narrower);
    expect(a.body['scope']).toBe('agency:mcp:read');
    const again = await refresh(tokens['refresh_token']!, narrower);
    expect(again.body['refresh_token']).toBe(a.body['refresh_token']);
    expect(again.body['scope']).toBe('agency:mcp:read');
    const wider = await refresh(tokens['refresh_token']!, { scope: 'agency:mcp:write' });
    expect(wider.body['error']).toBe('invalid_scope');
    expect((await connectionStatus(grace, a.body['access_token']!)).status).toBe('active');
  });
  it('after the window, reuse revokes the connection', async () => {
    const { tokens } = await connect(grace, { clientId: graceClient, redirectUri: REDIRECT });
    const a = await refresh(tokens['refresh_token']!);
    grace.clock.advance(11_000);
    expect((await refresh(tokens['refresh_token']!)).body['error']).toBe('invalid_grant');
    expect((await connectionStatus(grace, a.body['access_token']!)).revoke_reason).toBe('refresh_reuse');
  });
  it('a token two rotations back is not covered by the window', async () => {
    const { tokens } = await connect(grace, { clientId: graceClient, redirectUri: REDIRECT });
    const a = await refresh(tokens['refresh_token']!);
    const b = await refresh(a.body['refresh_token']!);
    expect((await refresh(tokens['refresh_token']!)).body['error']).toBe('invalid_grant');
    expect((await connectionStatus(grace, b.body['access_token']!)).revoke_reason).toBe('refresh_reuse');
  });
});

describe(`housekeeping (${ENGINE})`, () => {
  it('expired codes and abandoned pending connections are pruned on a later consent', async () => {
    const db = server.services.ctx.db;
    await authorize(server, ada, opts(), pkce().challenge); // a code never exchanged
    server.clock.advance(2 * 3600_000);
    await connect(server, { clientId, redirectUri: REDIRECT, browser: ada });
    const old = await db
      .selectFrom('authorization_codes')
      .select('hash')
      .where('expires_at', '<', server.clock.now() - 3600_000)
      .execute();
    expect(old).toHaveLength(0);
    const pending = await db
      .selectFrom('connections')
      .select('id')
      .where('status', '=', 'pending')
      .where('expires_at', '<', server.clock.now() - 3600_000)
      .execute();
    expect(pending).toHaveLength(0);
  });
});

describe(`forged and stray tokens (${ENGINE})`, () => {
  const me = (token: string) =>
    fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
  const claims = async () => {
    const userId = (await server.services.ctx.db.selectFrom('users').select('id').executeTakeFirstOrThrow())
      .id;
    const now = Math.floor(server.clock.now() / 1000);
    return {
      iss: server.url.auth,
      sub: userId,
      aud: server.url.api,
      iat: now,
      exp: now + 600,
      jti: 'j-forged',
      client_id: clientId,
      scope: 'user:read',
    };
  };
  it('an access token issued in the future (iat an hour ahead) is refused', async () => {
    const ctx = server.services.ctx;
    const c = await claims();
    const token = await signWithServerKey(ctx, { typ: 'at+jwt' }, { ...c, cid: 'con_x', iat: c.iat + 3600 });
    expect((await me(token)).status).toBe(401);
  });
  it('an at+jwt for the REST API without cid (nothing to check liveness against) is refused at /me', async () => {
    const token = await signWithServerKey(server.services.ctx, { typ: 'at+jwt' }, await claims());
    expect((await me(token)).status).toBe(401);
  });
  it('the AS metadata does not offer user:read while OAUTH_USER_RESOURCES is off', async () => {
    const res = await fetch(`${server.url.auth}/.well-known/oauth-authorization-server`);
    const metadata = (await res.json()) as { scopes_supported: string[] };
    expect(metadata.scopes_supported).not.toContain('user:read');
    expect(metadata.scopes_supported).toContain('agency:mcp:read');
  });
});

describe(`borrowed names in client metadata (${ENGINE})`, () => {
  it('DCR with client_uri and logo_uri on a host unrelated to the redirect URIs: left out, consent shows the redirect host', async () => {
    const { res, body } = await register(server, {
      redirect_uris: ['https://evil.example/cb'],
      client_name: 'Claude',
      client_uri: 'https://claude.ai',
      logo_uri: 'https://claude.ai/logo.png',
    });
    expect(res.status).toBe(201);
    expect(body).not.toHaveProperty('client_uri');
    expect(body).not.toHaveProperty('logo_uri');
    const { challenge } = pkce();
    const q = authorizeQuery(
      server,
      { clientId: body['client_id'] as string, redirectUri: 'https://evil.example/cb', resource: RESOURCE },
      challenge,
    );
    const page = await (await ada.get(`/oauth2/auth?${q}`)).text();
    expect(page).not.toContain('claude.ai');
    expect(page).toContain('evil.example');
  });
  it('a client_name with a control or bidirectional formatting character is refused', async () => {
    // U+202E RIGHT-TO-LEFT OVERRIDE would show the rest of the consent sentence reversed, the host included.
    for (const client_name of ['Planner\u202e moc.live', 'Planner\u2066', 'Planner\nBot', 'Planner\u200f']) {
      const { res, body } = await register(server, {
        redirect_uris: ['https://agent.example/cb'],
        client_name,
      });
      expect(res.status).toBe(400);
      expect(body).toEqual({
        error: 'invalid_client_metadata',
        error_description: 'client_name: must not hold control or bidirectional formatting characters',
      });
    }
    // Right-to-left text itself is a name like any other.
    const { res } = await register(server, {
      redirect_uris: ['https://agent.example/cb'],
      client_name: 'מתכנן',
    });
    expect(res.status).toBe(201);
  });
  it('a name stored before such characters were refused is shown with U+FFFD where they were', async () => {
    const { body } = await register(server, {
      redirect_uris: ['https://agent.example/cb'],
      client_name: 'Planner',
    });
    const clientId = body['client_id'] as string;
    const db = server.services.ctx.db;
    const row = await db
      .selectFrom('oauth_clients')
      .select('metadata')
      .where('client_id', '=', clientId)
      .executeTakeFirstOrThrow();
    const metadata = { ...JSON.parse(row.metadata), client_name: 'Planner\u202e moc.live' };
    await db
      .updateTable('oauth_clients')
      .set({ metadata: JSON.stringify(metadata) })
      .where('client_id', '=', clientId)
      .execute();
    const { challenge } = pkce();
    const q = authorizeQuery(
      server,
      { clientId, redirectUri: 'https://agent.example/cb', resource: RESOURCE },
      challenge,
    );
    const page = await (await ada.get(`/oauth2/auth?${q}`)).text();
    expect(page).toContain('Planner\ufffd moc.live');
    expect(page).not.toContain('\u202e');
  });
  it('a client_uri on the redirect host is kept', async () => {
    const { body } = await register(server, {
      redirect_uris: ['https://agent.example/cb'],
      client_uri: 'https://www.agent.example/about',
    });
    expect(body['client_uri']).toBe('https://www.agent.example/about');
  });
});
