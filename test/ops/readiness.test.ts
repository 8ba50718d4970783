import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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
