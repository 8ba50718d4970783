import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { UNAVAILABLE_MESSAGE } from '../../src/http/errors.js';
import { REDIS_HANDSHAKE_TIMEOUT_MS, REDIS_TIMEOUT_MS } from '../../src/http/rate-limit.js';
import { ENGINE, freshDatabase, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest, userReads } from '../helpers/mcp.js';
import { MARGIN_MS, OPS_REDIS_URL, postSession, readyInFull, within } from '../helpers/ops.js';
import { TcpForwarder } from '../helpers/tcp-forwarder.js';
import { grant } from '../agency-mcp/helpers.js';

/**
 * A dependency that stops answering while its connections stay open — a hung server, a black-holed route — is the
 * fault that turns unbounded waits into hung requests. PostgreSQL and Redis are put behind a TCP forwarder that the
 * test stalls and resumes (the machine's shared servers are never touched): every request must be answered within
 * the configured bounds, the process must stay up, say so once in the log, and serve normally again by itself.
 */

const CONNECT_MS = 500;
const STATEMENT_MS = 1000;
/** The longest a request may wait for PostgreSQL (the client gives up a second after statement_timeout). */
const PG_BOUND_MS = Math.max(CONNECT_MS, STATEMENT_MS + 1000);

async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const started = performance.now();
  const value = await work();
  return { value, ms: performance.now() - started };
}

/** A server on a fresh PostgreSQL schema reached through a forwarder the test can stall, with small bounds. */
async function serverBehindForwarder(env: Record<string, string>) {
  const db = await freshDatabase('postgres');
  const { forwarder: pg, url } = await TcpForwarder.before(db.env['DATABASE_URL']!);
  const server = await startTestServer({
    env: {
      ...db.env,
      DATABASE_URL: url,
      DATABASE_CONNECT_TIMEOUT_MS: String(CONNECT_MS),
      DATABASE_STATEMENT_TIMEOUT_MS: String(STATEMENT_MS),
      ...env,
    },
  });
  return { pg, server, drop: db.drop };
}

async function stopAll(
  pg: TcpForwarder | undefined,
  server: TestServer | undefined,
  drop?: () => Promise<void>,
) {
  pg?.resume();
  await server?.close();
  await pg?.close();
  await drop?.();
}

describe('PostgreSQL stalled behind a forwarder (always PostgreSQL)', () => {
  let pg: TcpForwarder;
  let server: TestServer;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    ({ pg, server, drop } = await serverBehindForwarder({
      DATABASE_POOL_SIZE: '4',
      LIVENESS_CACHE_SECONDS: '0',
    }));
  });
  afterAll(() => stopAll(pg, server, drop));

  it('sign-in and /me answer 503 with Retry-After within the bounds, /ready names the database, and it recovers', async () => {
    const { token } = await signIn(server);
    const me = () => fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
    expect((await me()).status).toBe(200);
    pg.stall();
    // Several at once: the pooled connections are stuck and new ones cannot finish their handshake.
    const answers = await Promise.all([
      timed(me),
      timed(me),
      timed(() => postSession(server.url.auth, 'ada')),
      timed(me),
      timed(me),
      timed(() => postSession(server.url.auth, 'grace')),
    ]);
    for (const { value: res, ms } of answers) {
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('5');
      expect(ms).toBeLessThan(PG_BOUND_MS + MARGIN_MS);
    }
    // And once every pooled connection has been found stuck, the next ones too.
    const later = await timed(me);
    expect(later.value.status).toBe(503);
    expect(later.ms).toBeLessThan(PG_BOUND_MS + MARGIN_MS);
    const ready = await fetch(`${server.url.api}/ready`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({
      status: 'unavailable',
      checks: { database: 'down', database_writes: 'down' },
    });
    expect((await fetch(`${server.url.api}/health`)).status).toBe(200);
    pg.resume();
    expect(await within(async () => (await me()).status === 200, 10_000)).toBeGreaterThanOrEqual(0);
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    expect((await fetch(`${server.url.api}/ready`)).status).toBe(200);
    const lines = server.logs.lines.map((l) => l['msg']);
    expect(lines.filter((m) => m === 'database unavailable')).toHaveLength(1);
    expect(lines).toContain('database available again');
    expect(lines.filter((m) => m === 'unhandled error' || m === 'MCP request failed')).toEqual([]);
  });
});

describe('MCP requests while PostgreSQL is stalled (always PostgreSQL)', () => {
  let pg: TcpForwarder;
  let server: TestServer;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    // The grant's and the session's liveness stay cached, so the outage is met inside the request: by the dashboard
    // API, or reading the user.
    ({ pg, server, drop } = await serverBehindForwarder({ LIVENESS_CACHE_SECONDS: '300' }));
  });
  afterAll(() => stopAll(pg, server, drop));

  it('a call the dashboard API cannot serve is HTTP 503 with Retry-After (fast path, SDK path, a write), not a tool error', async () => {
    const g = await grant(server, { username: 'ada' });
    const endpoint = `${server.url.agencyMcp}/mcp`;
    const call = (name: string, args: Record<string, unknown> = {}) =>
      modernRequest(endpoint, 'tools/call', { name, arguments: args }, { token: g.token });
    const clients = (await (await call('list_clients')).json()) as {
      result: { structuredContent: { data: { id: string }[] } };
    };
    const clientId = clients.result.structuredContent.data[0]!.id;
    expect((await call('get_client', { client_id: clientId })).status).toBe(200);
    pg.stall();
    for (const [name, args] of [
      ['list_clients', {}],
      ['get_client', { client_id: clientId }],
      ['create_client', { name: 'During the outage' }],
    ] as const) {
      const { value: res, ms } = await timed(() => call(name, args));
      expect({ name, status: res.status, retryAfter: res.headers.get('retry-after') }).toEqual({
        name,
        status: 503,
        retryAfter: '5',
      });
      expect(((await res.json()) as { error?: { code: number } }).error?.code).toBe(-32000);
      expect(ms).toBeLessThan(PG_BOUND_MS + MARGIN_MS);
    }
    pg.resume();
    expect(
      await within(async () => (await call('list_clients')).status === 200, 10_000),
    ).toBeGreaterThanOrEqual(0);
    const lines = server.logs.lines.map((l) => l['msg']);
    expect(lines.filter((m) => m === 'database unavailable')).toHaveLength(1);
    expect(lines.filter((m) => m === 'dashboard API call failed' || m === 'unhandled error')).toEqual([]);
  });

  // The SDK answered a tool error (HTTP 200) and `-32603` with node-postgres's words ("Connection terminated due to
  // connection timeout"): the agent was told the server broke, not to retry.
  it('get_me and user://me on every path are HTTP 503 with Retry-After, -32000, and it recovers', async () => {
    const { token } = await signIn(server, 'grace'); // not ada, whom the agency calls above read
    const endpoint = `${server.url.mcp}/mcp`;
    const logged = server.logs.lines.length;
    const requests = userReads(endpoint, token);
    // Authenticated once (the liveness cached), the user not read yet.
    expect((await modernRequest(endpoint, 'tools/list', {}, { token })).status).toBe(200);
    pg.stall();
    for (const [name, request] of Object.entries(requests)) {
      const { value: res, ms } = await timed(request);
      expect({ name, status: res.status, retryAfter: res.headers.get('retry-after') }).toEqual({
        name,
        status: 503,
        retryAfter: '5',
      });
      const error = ((await res.json()) as { error?: { code: number; message: string } }).error;
      expect(error, name).toEqual({ code: -32000, message: UNAVAILABLE_MESSAGE, data: expect.anything() });
      expect(ms).toBeLessThan(PG_BOUND_MS + MARGIN_MS);
    }
    pg.resume();
    for (const request of Object.values(requests))
      expect(await within(async () => (await request()).status === 200, 10_000)).toBeGreaterThanOrEqual(0);
    const lines = server.logs.lines.slice(logged).map((l) => l['msg']);
    expect(lines.filter((m) => m === 'database unavailable')).toHaveLength(1);
    expect(lines.filter((m) => m === 'MCP error' || m === 'unhandled error')).toEqual([]);
  });
});

describe(`Redis stalled behind a forwarder (${ENGINE})`, () => {
  let redis: TcpForwarder;
  let server: TestServer;
  let direct: Redis;
  const perUsername = 3;

  beforeAll(async () => {
    const behind = await TcpForwarder.before(OPS_REDIS_URL);
    redis = behind.forwarder;
    server = await startTestServer({
      env: {
        REDIS_URL: behind.url,
        SIGNIN_LIMIT_PER_USERNAME: String(perUsername),
        // The per-address counter is shared by every test run against this Redis: out of the way here.
        SIGNIN_LIMIT_PER_IP: '1000000',
      },
    });
    direct = new Redis(OPS_REDIS_URL, { lazyConnect: true });
    await direct.connect();
  });
  afterAll(async () => {
    redis?.resume();
    await server?.close();
    await redis?.close();
    direct?.disconnect();
  });

  /** Failed sign-ins of a fresh username; the counter key says whether Redis counted them. */
  const failures = async (n: number) => {
    const username = `nobody-${randomBytes(4).toString('hex')}`;
    const statuses: number[] = [];
    for (let i = 0; i < n; i++) statuses.push((await postSession(server.url.auth, username, 'wrong')).status);
    const inRedis = await direct.get(`svc:signin-user-ip:${JSON.stringify([username, '127.0.0.1'])}`);
    return { statuses, inRedis };
  };
  const redisLines = () => server.logs.lines.filter((l) => String(l['msg']).startsWith('redis'));
  /** Redis answers readiness again. */
  const redisUp = () => readyInFull(server.url.api);

  it('counts in Redis while it answers', async () => {
    expect(await failures(1)).toEqual({ statuses: [401], inRedis: '1' });
  });

  it('stalled: sign-in answers within the Redis bound on memory limits, /ready names redis, one warning', async () => {
    redis.stall();
    // Limiter commands name their keys (`svc:signin-…`); the connection's own handshake does not.
    const limiterCommands = () => redis.sentWhileStalled().split('svc:signin').length - 1;
    for (let i = 0; i < 3; i++) {
      const { value: res, ms } = await timed(() => postSession(server.url.auth, 'ada'));
      expect(res.status).toBe(201);
      expect(ms).toBeLessThan(REDIS_TIMEOUT_MS + MARGIN_MS);
    }
    // Redis was waited for once: the first sign-in's commands met the stall, then the connection was dropped and
    // every later limit went straight to memory, sending nothing more.
    const waitedOn = limiterCommands();
    expect(waitedOn).toBeGreaterThan(0);
    // The limits still hold, counted in this instance's memory.
    const during = await failures(perUsername + 1);
    expect(during.statuses).toEqual([401, 401, 401, 429]);
    expect(during.inRedis).toBeNull();
    expect(limiterCommands()).toBe(waitedOn);
    const ready = await fetch(`${server.url.api}/ready`);
    expect(ready.status).toBe(200);
    expect((await ready.json()) as unknown).toMatchObject({ status: 'degraded', checks: { redis: 'down' } });
    expect(redisLines()).toHaveLength(1);
    expect(redisLines()[0]).toMatchObject({
      level: 40,
      msg: 'redis (rate limits fall back to memory) unavailable',
    });
    expect((await fetch(`${server.url.api}/health`)).status).toBe(200);
  });

  it('resumed: Redis is used again, and the log says so once', async () => {
    redis.resume();
    expect(await within(redisUp, 10_000)).toBeGreaterThanOrEqual(0);
    expect(await failures(1)).toEqual({ statuses: [401], inRedis: '1' });
    expect(redisLines().map((l) => l['msg'])).toEqual([
      'redis (rate limits fall back to memory) unavailable',
      'redis (rate limits fall back to memory) available again',
    ]);
  });

  it('a reconnection whose handshake is never answered is given up for a new one, which counts in Redis', async () => {
    redis.stall();
    // The sign-in's commands meet the stall: the connection is dropped, and the new one's handshake is held too…
    expect((await postSession(server.url.auth, 'ada')).status).toBe(201);
    await new Promise((resolve) => setTimeout(resolve, 500));
    // …for good (a server gone silent with the connection open), while a connection made now would be served.
    redis.blackholeOpen();
    redis.resume();
    const started = performance.now();
    expect(await within(redisUp, 15_000)).toBeGreaterThanOrEqual(0);
    expect(performance.now() - started).toBeLessThan(REDIS_HANDSHAKE_TIMEOUT_MS + MARGIN_MS);
    expect(await failures(1)).toEqual({ statuses: [401], inRedis: '1' });
  });
});
