import { type ChildProcess, spawn } from 'node:child_process';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { dependencyUp, freePort, logged as loggedLines, postSession, within } from '../helpers/ops.js';
import { TcpForwarder } from '../helpers/tcp-forwarder.js';

/**
 * A Redis failover behind one address, as Sentinel or a managed service's endpoint makes it: the old primary is
 * demoted to a replica of the new one and keeps answering, refusing every write with READONLY, while the address
 * now names the new primary. Two Redis servers of the test's own (the machine's is shared by the other tests),
 * behind a forwarder that sends new connections to the new primary. The instance must say so once, count in memory
 * meanwhile (sign-in goes on), follow the address to the new primary by itself, and say once that Redis counts again.
 */

interface OwnRedis {
  port: number;
  client: Redis;
  stop(): Promise<void>;
}

/** A Redis server on a free loopback port that keeps nothing on disk, stopped by its PID; `password` required if given. */
async function startRedis(password?: string): Promise<OwnRedis> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    [
      ...['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      ...(password ? ['--requirepass', password] : []),
    ],
    { stdio: 'ignore' },
  );
  const client = new Redis({
    port,
    host: '127.0.0.1',
    lazyConnect: true,
    retryStrategy: () => 100,
    ...(password ? { password } : {}),
  });
  // Refused until the server listens: the ping below retries.
  client.on('error', () => {});
  expect(
    await within(async () => (await client.ping().catch(() => '')) === 'PONG', 10_000),
  ).toBeGreaterThanOrEqual(0);
  return {
    port,
    client,
    async stop() {
      client.disconnect();
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

let oldPrimary: OwnRedis;
let newPrimary: OwnRedis;
let forwarder: TcpForwarder;
let server: TestServer;

beforeAll(async () => {
  [oldPrimary, newPrimary] = await Promise.all([startRedis(), startRedis()]);
  forwarder = await TcpForwarder.start({ host: '127.0.0.1', port: oldPrimary.port });
  server = await startTestServer({
    env: { REDIS_URL: `redis://127.0.0.1:${forwarder.port}`, METRICS_PORT: '0' },
  });
});
afterAll(async () => {
  await server?.close();
  await forwarder?.close();
  await Promise.all([oldPrimary?.stop(), newPrimary?.stop()]);
});

const ATTEMPTS_KEY = 'svc:signin-ip:127.0.0.1';
const attempts = async (redis: OwnRedis) => Number((await redis.client.get(ATTEMPTS_KEY)) ?? 0);
const logged = (message: string) =>
  loggedLines(server.logs, `redis (rate limits fall back to memory) ${message}`);
const redisUp = () => dependencyUp(server.services.metricsUrl!, 'redis');

describe(`Redis failed over behind its address (${ENGINE})`, () => {
  it('READONLY from the demoted primary: logged once, sign-in goes on, the new primary counts, logged once', async () => {
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    expect(await attempts(oldPrimary)).toBe(1);

    // The failover: the old primary becomes a replica of the new one; the address names the new one.
    await oldPrimary.client.call('REPLICAOF', '127.0.0.1', String(newPrimary.port));
    forwarder.retarget({ host: '127.0.0.1', port: newPrimary.port });

    const refused = await postSession(server.url.auth, 'ada');
    expect(refused.status).toBe(201);
    const warnings = logged('unavailable');
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ level: 40 });
    expect(String(warnings[0]!['reason'])).toContain('READONLY');

    // The instance drops the demoted primary's connection and follows the address: the new primary counts.
    const followed = await within(async () => {
      expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
      return (await attempts(newPrimary)) > 0;
    }, 10_000);
    expect(followed).toBeGreaterThanOrEqual(0);
    expect(logged('available again')).toHaveLength(1);
    expect(logged('unavailable')).toHaveLength(1);
    expect(await redisUp()).toBe(1);
    expect(server.logs.lines.filter((l) => l['msg'] === 'unhandled error')).toEqual([]);
  });
});

describe(`Redis refusing the service's password (${ENGINE})`, () => {
  it("sign-ins count in memory, /ready names redis, and the one warning gives Redis's reason (WRONGPASS)", async () => {
    const guarded = await startRedis('the-right-one');
    const wrong = await startTestServer({ env: { REDIS_URL: `redis://:not-it@127.0.0.1:${guarded.port}` } });
    try {
      expect((await signIn(wrong, 'ada')).token).toBeTruthy();
      const ready = await fetch(`${wrong.url.api}/ready`);
      expect(ready.status).toBe(200);
      expect(await ready.json()).toEqual({
        status: 'degraded',
        checks: { database: 'up', database_writes: 'up', redis: 'down' },
      });
      const warnings = loggedLines(wrong.logs, 'redis (rate limits fall back to memory) unavailable');
      expect(warnings).toHaveLength(1);
      expect(String(warnings[0]!['reason'])).toContain('WRONGPASS');
    } finally {
      await wrong.close();
      await guarded.stop();
    }
  });
});
