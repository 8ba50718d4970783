import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signInGuard } from '../../src/auth/sign-in-guard.js';
import { EVENT_LOOP_HELD_MS } from '../../src/base/event-loop-watch.js';
import { REDIS_TIMEOUT_MS } from '../../src/http/rate-limit.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { OPS_REDIS_URL } from '../helpers/ops.js';

/**
 * The process held: a synchronous call that does not return (the embedded database's on a disk that stalled), CPU
 * starvation, a long collection. Nothing is answered meanwhile, health checks included; once it runs again the log
 * says for how long, on every instance, metrics listener or not. The hold here is the test's own synchronous loop in
 * the server's process: what the watch measures is the same whatever holds it.
 */

const HELD =
  'event loop held: nothing was answered meanwhile (a synchronous database call on a stalled disk, CPU starvation)';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

/** Holds this process's event loop for `ms`, as a synchronous call that does not return would. */
function hold(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Nothing: the point is that nothing else runs.
  }
}

const helds = () => server.logs.lines.filter((l) => l['msg'] === HELD);
/** Waits for the watch's next look (it looks every 250 ms), the process answering requests meanwhile. */
const aLookLater = () => new Promise((r) => setTimeout(r, 600));

describe(`the event loop held (${ENGINE})`, () => {
  it('held 1.5 s: a health check asked for just before is answered after it, and one warning says how long', async () => {
    const health = fetch(`${server.url.api}/health`);
    const before = helds().length;
    hold(1500);
    expect((await health).status).toBe(200);
    await aLookLater();
    const warnings = helds().slice(before);
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40 });
    // The hold, give or take the watch's look every 250 ms and a loaded machine's scheduling.
    expect(warnings[0]!['held_ms']).toBeGreaterThanOrEqual(EVENT_LOOP_HELD_MS);
    expect(warnings[0]!['held_ms']).toBeLessThan(1500 + 2000);
  });

  it('held less than the threshold: nothing is logged', async () => {
    const before = helds().length;
    hold(EVENT_LOOP_HELD_MS * 0.3);
    await aLookLater();
    expect(helds().slice(before)).toEqual([]);
  });

  it('stopped with the services: no timer is left behind', async () => {
    const other = await startTestServer();
    await other.close();
    const before = other.logs.lines.length;
    hold(1500);
    await aLookLater();
    expect(other.logs.lines.slice(before)).toEqual([]);
  });
});

describe(`the event loop held while Redis is asked (${ENGINE})`, () => {
  let withRedis: TestServer;
  let direct: Redis;
  beforeAll(async () => {
    withRedis = await startTestServer({ env: { REDIS_URL: OPS_REDIS_URL } });
    direct = new Redis(OPS_REDIS_URL);
  });
  afterAll(async () => {
    direct?.disconnect();
    await withRedis?.close();
  });

  it("held past the Redis bound while a limit's command is out: Redis's answer counts, no outage", async () => {
    const username = `held-${randomBytes(4).toString('hex')}`;
    // The guard sends its first limit's command at once; Redis answers while this process is held.
    const attempt = signInGuard(withRedis.services.ctx)(
      '192.0.2.77',
      username,
      'wrong',
      withRedis.services.ctx.log,
    );
    hold(REDIS_TIMEOUT_MS + 300);
    expect(await attempt).toEqual({ ok: false, reason: 'invalid_credentials' });
    // Every limit was counted in Redis (none fell back to memory), and nothing says Redis was down.
    expect(await direct.get(`svc:signin-user-ip:${JSON.stringify([username, '192.0.2.77'])}`)).toBe('1');
    expect(withRedis.logs.lines.filter((l) => String(l['msg']).startsWith('redis'))).toEqual([]);
  });
});
