import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authorize, connect, pkce, register, token } from '../auth/oauth-helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';

/** GET /ready (readiness, for a load balancer) beside GET /health (liveness), on every host. */

let server: TestServer;
let noRedis: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  // Redis configured but unreachable (nothing listens on port 1): what a Redis outage looks like to an instance.
  noRedis = await startTestServer({ env: { REDIS_URL: 'redis://127.0.0.1:1' } });
});
afterAll(async () => {
  await Promise.all([server?.close(), noRedis?.close()]);
});

describe(`readiness (${ENGINE})`, () => {
  it('every host answers GET /health 200 (liveness), as docs/deployment.md says', async () => {
    // Only the REST API's did: a liveness probe on another host met 404, and a supervisor restarted it for good.
    for (const url of Object.values(server.url)) {
      const res = await fetch(`${url}/health`);
      expect(res.status, url).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'healthy', uptime: expect.any(Number) });
    }
  });

  it('every host answers GET /ready 200 when its dependencies answer', async () => {
    for (const url of Object.values(server.url)) {
      const res = await fetch(`${url}/ready`);
      expect(res.status, url).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(await res.json()).toEqual({
        status: 'ready',
        checks: { database: 'up', database_writes: 'up' },
      });
    }
  });

  it('Redis down: /ready stays 200 on every host, "degraded" naming it; sign-in works on per-instance limits', async () => {
    // Every instance shares the one Redis: a 503 would take them all out of rotation for a rate-limit counter.
    for (const url of Object.values(noRedis.url)) {
      const ready = await fetch(`${url}/ready`);
      expect(ready.status, url).toBe(200);
      expect(ready.headers.get('retry-after')).toBeNull();
      expect(await ready.json()).toEqual({
        status: 'degraded',
        checks: { database: 'up', database_writes: 'up', redis: 'down' },
      });
    }
    expect((await fetch(`${noRedis.url.api}/health`)).status).toBe(200);
    expect((await signIn(noRedis, 'ada')).token).toBeTruthy();
    // The operator is told once, not per request.
    const warnings = noRedis.logs.lines.filter((l) => String(l['msg']).startsWith('redis'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40, dependency: 'redis (rate limits fall back to memory)' });
  });
});

describe(`the access log (${ENGINE})`, () => {
  it('one info line per request with surface, method, route, path, status and duration; never the token or query', async () => {
    const { token } = await signIn(server, 'ada');
    await fetch(`${server.url.api}/me?secret=hunter2`, { headers: { authorization: `Bearer ${token}` } });
    const line = server.logs.lines.find((l) => l['msg'] === 'request' && l['path'] === '/me');
    expect(line).toMatchObject({ level: 30, surface: 'api', method: 'GET', route: '/me', status: 200 });
    expect(typeof line?.['ms']).toBe('number');
    expect(typeof line?.['request_id']).toBe('string');
    const all = JSON.stringify(server.logs.lines);
    expect(all).not.toContain(token);
    expect(all).not.toContain('hunter2');
    expect(all).not.toContain('ada-demo-password');
  });

  it("a refusal's line carries its code in every shape, never its description", async () => {
    const lineOf = (res: Response) =>
      server.logs.lines.find(
        (l) => l['msg'] === 'request' && l['request_id'] === res.headers.get('x-request-id'),
      );
    const { token: session } = await signIn(server, 'ada');
    // REST: the error object's code.
    const me = await fetch(`${server.url.api}/me`, { headers: { authorization: 'Bearer not-a-token' } });
    const meCode = ((await me.json()) as { error: { code: string } }).error.code;
    expect(lineOf(me)).toMatchObject({ status: 401, error: meCode });
    // OAuth, through Fastify (registration) and beside it (the refresh grant's fast path).
    const registration = await register(server, { redirect_uris: ['ftp://nowhere.example/'] });
    expect(lineOf(registration.res)).toMatchObject({ status: 400, error: 'invalid_redirect_uri' });
    const refresh = await token(server, { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'y' });
    expect(lineOf(refresh.res)).toMatchObject({ status: 400, error: 'invalid_grant' });
    // MCP: the bearer refusal's RFC 6750 code, and a JSON-RPC error's number.
    const mcp = (authorization: string, body: unknown) =>
      fetch(`${server.url.mcp}/mcp`, {
        method: 'POST',
        headers: {
          authorization,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(body),
      });
    expect(lineOf(await mcp('Bearer not-a-token', {}))).toMatchObject({
      status: 401,
      error: 'invalid_token',
    });
    // Refused by the service (a batch), and by the SDK's transport (not a JSON-RPC message).
    const ping = { jsonrpc: '2.0', id: 1, method: 'ping' };
    expect(lineOf(await mcp(`Bearer ${session}`, [ping, ping]))).toMatchObject({
      status: 400,
      error: -32600,
    });
    expect(lineOf(await mcp(`Bearer ${session}`, { not: 'json-rpc' }))).toMatchObject({
      status: 400,
      error: -32600,
    });
    // The authorization endpoint's refusal, sent back to the client in a redirect (RFC 6749 §4.1.2.1).
    const { clientId, browser, redirectUri } = await connect(server);
    const back = await authorize(server, browser, { clientId, redirectUri }, pkce().challenge, 'deny');
    expect(back.searchParams.get('error')).toBe('access_denied');
    const denied = server.logs.lines.filter((l) => l['msg'] === 'request' && l['error'] === 'access_denied');
    expect(denied).toMatchObject([{ status: 303, route: '/oauth2/auth/consent' }]);
    // A success carries none; no description reaches the log (one quotes what the client sent).
    expect(
      lineOf(await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${session}` } })),
    ).not.toHaveProperty('error');
    const all = JSON.stringify(server.logs.lines);
    expect(all).not.toContain('ftp://nowhere.example');
    expect(all).not.toContain('error_description');
  });

  it('ACCESS_LOG=off: successes are not logged at info', async () => {
    const quiet = await startTestServer({ env: { ACCESS_LOG: 'off' } });
    try {
      await fetch(`${quiet.url.api}/health`);
      expect(quiet.logs.lines.filter((l) => l['msg'] === 'request' && l['status'] === 200)).toEqual([]);
    } finally {
      await quiet.close();
    }
  });
});
