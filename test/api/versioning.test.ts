import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startTestServer, type TestServer, userId } from '../helpers/harness.js';
import { OpenApiChecker } from '../helpers/openapi.js';
import { rawRequest } from '../helpers/raw-http.js';
import { OLD_VERSION, testVersions } from '../helpers/test-versions.js';
import { mintAccessToken } from '../helpers/tokens.js';

const BASELINE = '2026-09-24.albus';
let server: TestServer;
let openapi: OpenApiChecker;
let token: string;
let adaId: string;

beforeAll(async () => {
  server = await startTestServer({ versions: testVersions });
  openapi = await OpenApiChecker.fetch(server.url.api);
  token = (await signIn(server, 'ada')).token;
  adaId = await userId(server);
});
afterAll(() => server.close());

const me = (headers: Record<string, string> = {}, bearer = token) =>
  fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${bearer}`, ...headers } });
/** Pins ada's account as another instance would: straight in the database, seen here once the cache bound passes. */
async function pinUser(version: string | null) {
  await server.services.ctx.db
    .updateTable('users')
    .set({ api_version: version })
    .where('id', '=', adaId)
    .execute();
  server.clock.advance(server.config.livenessCacheSeconds * 1000 + 1);
}

describe('response change modules', () => {
  it('rewrite the response for an older version', async () => {
    const res = await me({ 'Svc-Version': OLD_VERSION });
    expect(res.status).toBe(200);
    expect(res.headers.get('svc-version')).toBe(OLD_VERSION);
    expect(await res.json()).toEqual({ object: 'user', id: adaId, username: 'ada', avatar_url: null });
  });

  it('leave the latest version untouched, asked for or by default', async () => {
    for (const headers of [{ 'Svc-Version': BASELINE }, {}] as Record<string, string>[]) {
      const res = await me(headers);
      expect(res.headers.get('svc-version')).toBe(BASELINE);
      expect(await openapi.check('GET', '/me', res)).toEqual({
        object: 'user',
        id: adaId,
        username: 'ada',
        image_url: null,
      });
    }
  });
});

describe('version resolution: header, then pin, then baseline', () => {
  it("uses the user's pinned version when no header is sent", async () => {
    await pinUser(OLD_VERSION);
    try {
      const res = await me();
      expect(res.headers.get('svc-version')).toBe(OLD_VERSION);
      expect(await res.json()).toHaveProperty('avatar_url');
      const overridden = await me({ 'Svc-Version': BASELINE });
      expect(overridden.headers.get('svc-version')).toBe(BASELINE);
    } finally {
      await pinUser(null);
    }
  });

  it("uses the OAuth client's pin before the user's", async () => {
    const db = server.services.ctx.db;
    await db
      .insertInto('oauth_clients')
      .values({
        client_id: 'pinned-client',
        kind: 'dcr',
        metadata: '{}',
        api_version: OLD_VERSION,
        created_at: 0,
        last_used_at: null,
      })
      .execute();
    await pinUser(BASELINE);
    try {
      const pinned = await mintAccessToken(server.services.ctx, {
        userId: adaId,
        audience: server.url.api,
        scope: 'user:read',
        clientId: 'pinned-client',
      });
      expect((await me({}, pinned)).headers.get('svc-version')).toBe(OLD_VERSION);
      const unpinned = await mintAccessToken(server.services.ctx, {
        userId: adaId,
        audience: server.url.api,
        scope: 'user:read',
        clientId: 'other-client',
      });
      expect((await me({}, unpinned)).headers.get('svc-version')).toBe(BASELINE);
    } finally {
      await pinUser(null);
    }
  });

  it('falls back to the baseline when a pin names a version no longer served', async () => {
    await pinUser('2020-01-01.gone');
    try {
      expect((await me()).headers.get('svc-version')).toBe(BASELINE);
    } finally {
      await pinUser(null);
    }
  });
});

describe('a bad Svc-Version header is a 400 invalid_api_version', () => {
  const cases: [string, string][] = [
    ['empty', ''],
    ['upper-cased', '2026-09-24.ALBUS'],
    ['a future date', '2099-01-01.albus'],
    ['a known date with another codename', '2026-09-24.dumbledore'],
    ['malformed', 'latest'],
    ['a date without codename', '2026-09-24'],
  ];
  for (const [name, value] of cases) {
    it(name, async () => {
      const res = await rawRequest(`${server.url.api}/me`, {
        headers: [
          ['Authorization', `Bearer ${token}`],
          ['Svc-Version', value],
        ],
      });
      expectInvalidVersion(res.status, res.json(), res.header('x-request-id'));
      expect(res.header('svc-version')).toBe(BASELINE);
      expect(res.header('vary')).toContain('Svc-Version');
    });
  }

  it('repeated', async () => {
    const res = await rawRequest(`${server.url.api}/me`, {
      headers: [
        ['Authorization', `Bearer ${token}`],
        ['Svc-Version', BASELINE],
        ['svc-version', BASELINE],
      ],
    });
    expectInvalidVersion(res.status, res.json(), res.header('x-request-id'));
    expect((res.json() as { error: { message: string } }).error.message).toMatch(/2 times/);
  });

  it('is checked before authentication, so the caller learns the fix first', async () => {
    const res = await fetch(`${server.url.api}/me`, { headers: { 'Svc-Version': 'nope' } });
    expect(res.status).toBe(400);
    await openapi.check('GET', '/me', res);
  });

  it('is ignored by unversioned operations', async () => {
    expect((await fetch(`${server.url.api}/health`, { headers: { 'Svc-Version': 'nope' } })).status).toBe(
      200,
    );
  });
});

function expectInvalidVersion(status: number, body: unknown, requestId: string | undefined) {
  expect(status).toBe(400);
  const error = (body as { error: Record<string, string> }).error;
  expect(error).toMatchObject({
    type: 'invalid_request_error',
    code: 'invalid_api_version',
    param: 'Svc-Version',
    request_id: requestId,
  });
  expect(error['message']).toContain(OLD_VERSION);
  expect(error['message']).toContain(BASELINE);
}
