import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { mintAccessToken } from '../helpers/tokens.js';

type ErrorBody = {
  error: { type: string; code: string; message: string; param?: string; request_id: string };
};

const post = (server: TestServer, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });

describe('POST /api/sessions', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  it('answers 201 with a session object whose token works on GET /me', async () => {
    const res = await post(server, { username: 'ada', password: 'ada-demo-password' });
    expect(res.status).toBe(201);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const session = (await res.json()) as Record<string, string>;
    expect(Object.keys(session).sort()).toEqual(['expires_at', 'id', 'object', 'token']);
    expect(session['object']).toBe('session');
    expect(session['id']).toMatch(/^ses_/);
    expect(new Date(session['expires_at']!).toISOString()).toBe(session['expires_at']);
    const days = (Date.parse(session['expires_at']!) - server.clock.now()) / 86_400_000;
    expect(Math.round(days)).toBe(30);
    const me = await fetch(`${server.url.api}/me`, {
      headers: { authorization: `Bearer ${session['token']}` },
    });
    expect(me.status).toBe(200);
  });

  it('stores no secret: the session row holds no token', async () => {
    const { id, token } = await signIn(server, 'grace');
    const row = await server.services.ctx.db
      .selectFrom('sessions')
      .selectAll()
      .where('id', '=', id)
      .executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(token.split('.')[2]);
  });

  it('gives one identical 401 for a wrong password and for an unknown username', async () => {
    const wrongPassword = await post(server, { username: 'ada', password: 'not-her-password' });
    const unknownUser = await post(server, { username: 'nobody-here', password: 'not-her-password' });
    expect(wrongPassword.status).toBe(401);
    expect(unknownUser.status).toBe(401);
    const a = ((await wrongPassword.json()) as ErrorBody).error;
    const b = ((await unknownUser.json()) as ErrorBody).error;
    expect(a).toMatchObject({ type: 'authentication_error', code: 'invalid_credentials' });
    expect({ ...a, request_id: '' }).toEqual({ ...b, request_id: '' });
  });

  it('matches the username as a phone types it: capitalised, with a space after', async () => {
    expect((await post(server, { username: ' Ada ', password: 'ada-demo-password' })).status).toBe(201);
    // A–Z only: the Kelvin sign lower-cases to an ASCII k in Unicode, and names no one.
    expect((await post(server, { username: 'ADA\u212a', password: 'ada-demo-password' })).status).toBe(401);
  });

  it('names the missing or invalid field', async () => {
    for (const [body, param] of [
      [{ password: 'x' }, 'username'],
      [{ username: 'ada' }, 'password'],
      [{ username: 42, password: 'x' }, 'username'],
      [{ username: 'ada', password: 'x'.repeat(300) }, 'password'],
    ] as const) {
      const res = await post(server, body);
      expect(res.status).toBe(400);
      expect(((await res.json()) as ErrorBody).error).toMatchObject({ code: 'invalid_request', param });
    }
  });
});

describe('sign-in rate limits', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer({ env: { SIGNIN_LIMIT_PER_USERNAME: '3', SIGNIN_LIMIT_PER_IP: '12' } });
  });
  afterAll(() => server.close());

  it('per username: after 3 failures, 429 with Retry-After, even with the right password', async () => {
    for (let i = 0; i < 3; i++)
      expect((await post(server, { username: 'linus', password: 'wrong-wrong' })).status).toBe(401);
    const blocked = await post(server, { username: 'linus', password: 'linus-demo-password' });
    expect(blocked.status).toBe(429);
    const retryAfter = Number(blocked.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(server.config.signinLimit.windowSeconds);
    expect(((await blocked.json()) as ErrorBody).error).toMatchObject({
      type: 'rate_limit_error',
      code: 'rate_limited',
    });
    // Another username from the same address is not blocked by linus's failures.
    expect((await post(server, { username: 'grace', password: 'grace-demo-password' })).status).toBe(201);
  });

  it('spellings of one username share its budget', async () => {
    for (const username of ['Ada', ' ada', 'ADA '])
      expect((await post(server, { username, password: 'wrong-wrong' })).status).toBe(401);
    expect((await post(server, { username: 'ada', password: 'ada-demo-password' })).status).toBe(429);
  });

  it('per client address: 429 once the address has used its attempts', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 12; i++)
      statuses.push((await post(server, { username: `user${i}`, password: 'whatever-x' })).status);
    expect(statuses.at(-1)).toBe(429);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThan(0);
    const res = await post(server, { username: 'ada', password: 'ada-demo-password' });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toMatch(/^\d+$/);
  });
});

describe('DELETE /api/sessions/current', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(() => server.close());

  const del = (token?: string) =>
    fetch(`${server.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: token ? { authorization: `Bearer ${token}` } : {},
    });

  it('revokes the presenting session and only that one', async () => {
    const first = await signIn(server, 'ada');
    const second = await signIn(server, 'ada');
    expect((await del(first.token)).status).toBe(204);
    const again = await del(first.token);
    expect(again.status).toBe(401);
    expect(((await again.json()) as ErrorBody).error.code).toBe('token_revoked');
    const me = (t: string) => fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${t}` } });
    expect((await me(first.token)).status).toBe(401);
    expect((await me(second.token)).status).toBe(200);
  });

  it('needs a session token: none, or an OAuth access token, is refused', async () => {
    expect((await del()).status).toBe(401);
    const oauth = await mintAccessToken(server.services.ctx, {
      userId: 'usr_x',
      audience: server.url.auth,
      scope: 'user:read',
    });
    const res = await del(oauth);
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toContain('invalid_token');
  });
});
