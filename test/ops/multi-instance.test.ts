import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/base/clock.js';
import { SURFACES, type Surface } from '../../src/config/config.js';
import { seedDemo } from '../../src/domain/demo-seed.js';
import { openStore, type Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { KEY_ACTIVATION_DELAY_MS, KEY_REFRESH_INTERVAL_MS } from '../../src/tokens/signing-keys.js';
import { connect, token } from '../auth/oauth-helpers.js';
import { freshDatabase, type TestServer } from '../helpers/harness.js';
import { RoundRobinProxy } from '../helpers/round-robin-proxy.js';
import { MARGIN_MS, OPS_REDIS_URL, postSession, readyInFull, within } from '../helpers/ops.js';
import { TcpForwarder } from '../helpers/tcp-forwarder.js';
import { headerOf } from '../helpers/tokens.js';

/**
 * Two instances of the built command line (`node bin/svc.js start`, the dist/ that `npm ci` builds) on one
 * PostgreSQL schema and one Redis, behind a round-robin proxy per surface, as production runs them. Always
 * PostgreSQL and Redis, whatever TEST_DATABASE says: the embedded database cannot be shared by two processes.
 * Redis is reached through a forwarder, so that "Redis stops" never touches the machine's shared server; only this
 * test's PostgreSQL backends (found by application_name) are terminated.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLI = `${ROOT}bin/svc.js`;
const PG_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';
const APP = `svc-multi-${randomBytes(4).toString('hex')}`;
const LIVENESS_SECONDS = 2;
const PER_USERNAME = 10;

interface Instance {
  child: ChildProcess;
  ports: Record<Surface, number>;
  lines: Record<string, unknown>[];
  url(surface: Surface): string;
}

let store: Store;
let dropDatabase: () => Promise<void>;
let redis: TcpForwarder;
let proxies: Record<Surface, RoundRobinProxy>;
let instances: Instance[];
let env: Record<string, string>;

beforeAll(async () => {
  if (!existsSync(`${ROOT}dist/cli/svc.js`))
    throw new Error('dist/ is not built: run `npm run build` (npm ci does)');
  const database = await freshDatabase('postgres');
  dropDatabase = database.drop;
  const url = new URL(database.env['DATABASE_URL']!);
  url.searchParams.set('application_name', APP);
  store = openStore({
    databaseUrl: database.env['DATABASE_URL'],
    dataDir: '/nonexistent',
    databasePoolSize: 2,
  });
  await migrateToLatest(store.db);
  await seedDemo(store.db, systemClock, false);
  const behind = await TcpForwarder.before(OPS_REDIS_URL);
  redis = behind.forwarder;
  proxies = Object.fromEntries(
    await Promise.all(SURFACES.map(async (s) => [s, await RoundRobinProxy.start()] as const)),
  ) as Record<Surface, RoundRobinProxy>;
  env = {
    PATH: process.env['PATH'] ?? '',
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    ...Object.fromEntries(SURFACES.map((s) => [PORT_VARIABLE[s], '0'])),
    // Behind the balancer every instance publishes the same URLs: one issuer, one audience per resource.
    ...Object.fromEntries(SURFACES.map((s) => [URL_VARIABLE[s], proxies[s].url])),
    DATABASE_URL: url.toString(),
    DATABASE_CONNECT_TIMEOUT_MS: '1000',
    DATABASE_STATEMENT_TIMEOUT_MS: '2000',
    REDIS_URL: behind.url,
    LIVENESS_CACHE_SECONDS: String(LIVENESS_SECONDS),
    SIGNIN_LIMIT_PER_USERNAME: String(PER_USERNAME),
    // The per-address counters in Redis are shared by every test run on this machine: out of the way here.
    SIGNIN_LIMIT_PER_IP: '1000000',
    SHUTDOWN_TIMEOUT_SECONDS: '5',
    LOG_LEVEL: 'info',
  };
  instances = await Promise.all([startInstance(env), startInstance(env)]);
  for (const s of SURFACES) proxies[s].upstreams = instances.map((i) => i.ports[s]);
});

afterAll(async () => {
  await Promise.all((instances ?? []).map(stopInstance));
  await Promise.all(Object.values(proxies ?? {}).map((p) => p.close()));
  await redis?.close();
  await store?.close();
  await dropDatabase?.();
});

const PORT_VARIABLE: Record<Surface, string> = {
  api: 'API_PORT',
  mcp: 'MCP_PORT',
  'agency-mcp': 'AGENCY_MCP_PORT',
  auth: 'AUTH_PORT',
};
const URL_VARIABLE: Record<Surface, string> = {
  api: 'BASE_URL',
  mcp: 'MCP_URL',
  'agency-mcp': 'AGENCY_MCP_URL',
  auth: 'AUTH_URL',
};

/** `svc start` as a child process; resolves once every surface has logged where it listens. */
function startInstance(childEnv: Record<string, string>): Promise<Instance> {
  const child = spawn(process.execPath, [CLI, 'start'], {
    cwd: ROOT,
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const lines: Record<string, unknown>[] = [];
  const ports: Partial<Record<Surface, number>> = {};
  let buffered = '';
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('svc start did not listen within 30 s'));
    }, 30_000);
    let errors = '';
    // Read, so that a chatty stderr can never fill the pipe and block the child.
    child.stderr!.on('data', (chunk: Buffer) => (errors += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`svc start exited with ${code}: ${errors}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const complete = buffered.split('\n');
      buffered = complete.pop() ?? '';
      for (const line of complete.filter((l) => l.startsWith('{'))) {
        const entry = JSON.parse(line) as Record<string, unknown>;
        lines.push(entry);
        if (entry['msg'] === 'listening')
          ports[entry['surface'] as Surface] = Number(String(entry['listen']).split(':').pop());
      }
      if (Object.keys(ports).length === SURFACES.length) {
        clearTimeout(timer);
        const all = ports as Record<Surface, number>;
        resolve({ child, ports: all, lines, url: (s) => `http://127.0.0.1:${all[s]}` });
      }
    });
  });
}

/** SIGTERM (the graceful stop), then SIGKILL if it has not exited a few seconds later. */
async function stopInstance(instance: Instance): Promise<void> {
  const { child } = instance;
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 8000);
  await exited;
  clearTimeout(timer);
}

const alive = (instance: Instance) => instance.child.exitCode === null && instance.child.signalCode === null;

async function session(base: string, username = 'ada'): Promise<string> {
  const res = await postSession(base, username);
  expect(res.status).toBe(201);
  return ((await res.json()) as { token: string }).token;
}

const me = (base: string, bearer: string) =>
  fetch(`${base}/me`, { headers: { authorization: `Bearer ${bearer}` } });

const kidOf = (jwt: string) => headerOf(jwt)['kid'] as string;

describe('two `svc start` processes behind a round-robin balancer (PostgreSQL, Redis)', () => {
  it('a session works through the balancer, and its revocation is refused by both within LIVENESS_CACHE_SECONDS', async () => {
    const bearer = await session(proxies.auth.url);
    for (const instance of instances) expect((await me(instance.url('api'), bearer)).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await me(proxies.api.url, bearer)).status).toBe(200);
    const revoked = await fetch(`${proxies.auth.url}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${bearer}` },
    });
    expect(revoked.status).toBe(204);
    const refusedByBoth = async () => {
      const statuses = await Promise.all(instances.map(async (i) => (await me(i.url('api'), bearer)).status));
      return statuses.every((s) => s === 401);
    };
    const ms = await within(refusedByBoth, LIVENESS_SECONDS * 1000 + MARGIN_MS);
    expect(ms).toBeGreaterThanOrEqual(0);
  });

  it('parallel refreshes of one token split across both instances all succeed with one successor', async () => {
    const asServer = {
      url: {
        auth: proxies.auth.url,
        api: proxies.api.url,
        mcp: proxies.mcp.url,
        agencyMcp: proxies['agency-mcp'].url,
      },
      services: { ctx: { db: store.db } },
    } as unknown as TestServer;
    const { tokens } = await connect(asServer, {
      clientId: 'claude-code',
      redirectUri: 'http://127.0.0.1:9999/callback',
    });
    const at = (i: number) => ({ url: { auth: instances[i % 2]!.url('auth') } }) as TestServer;
    const refresh = (i: number, rt: string) =>
      token(at(i), { grant_type: 'refresh_token', refresh_token: rt, client_id: 'claude-code' });
    const burst = await Promise.all([0, 1, 2, 3, 4, 5].map((i) => refresh(i, tokens['refresh_token']!)));
    expect(burst.map((r) => r.res.status)).toEqual([200, 200, 200, 200, 200, 200]);
    expect(new Set(burst.map((r) => r.body['refresh_token'])).size).toBe(1);
    const next = await refresh(1, burst[0]!.body['refresh_token']!);
    expect(next.res.status).toBe(200);
  });

  it('the sign-in limit is shared: the 11th failed attempt is 429 on whichever instance', async () => {
    const username = `victim-${randomBytes(4).toString('hex')}`;
    const statuses: number[] = [];
    for (let i = 0; i < PER_USERNAME; i++)
      statuses.push((await postSession(proxies.auth.url, username, 'x')).status);
    expect(statuses).toEqual(Array(PER_USERNAME).fill(401));
    for (const instance of instances) {
      const res = await postSession(instance.url('auth'), username, 'x');
      expect(res.status).toBe(429);
      expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
    }
  });

  it('`svc keys rotate` reaches both instances within the key-pickup bound; tokens of either verify on both', async () => {
    const before = await session(instances[0]!.url('auth'));
    const { stdout } = await promisify(execFile)(process.execPath, [CLI, 'keys', 'rotate'], {
      cwd: ROOT,
      env: { PATH: env['PATH']!, NODE_ENV: 'test', DATABASE_URL: env['DATABASE_URL']! },
    });
    const kid = /signing with new key (\S+)/.exec(stdout)?.[1];
    expect(kid).toBeTruthy();
    const rotatedAt = Date.now();
    const published = async () => {
      const sets = await Promise.all(
        instances.map(
          async (i) =>
            (await (await fetch(`${i.url('auth')}/.well-known/jwks.json`)).json()) as {
              keys: { kid: string }[];
            },
        ),
      );
      return sets.every((set) => set.keys.some((k) => k.kid === kid));
    };
    expect(await within(published, KEY_REFRESH_INTERVAL_MS + MARGIN_MS)).toBeGreaterThanOrEqual(0);
    // The new key signs once every instance publishes it (docs/deployment.md#keys).
    await new Promise((r) =>
      setTimeout(r, Math.max(0, rotatedAt + KEY_ACTIVATION_DELAY_MS - Date.now() + 200)),
    );
    const signed = await Promise.all(instances.map((i) => session(i.url('auth'))));
    for (const jwt of signed) expect(kidOf(jwt)).toBe(kid);
    for (const jwt of [...signed, before])
      for (const instance of instances) expect((await me(instance.url('api'), jwt)).status).toBe(200);
  });

  it('PostgreSQL backends terminated under load: both stay up, answer 503 or success meanwhile, and serve again', async () => {
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    const statuses: number[] = [];
    let stop = false;
    const load = (async () => {
      while (!stop) {
        const batch = await Promise.all([
          postSession(proxies.auth.url, 'ada'),
          fetch(`${proxies.api.url}/ready`),
          postSession(proxies.auth.url, 'grace'),
          fetch(`${proxies.auth.url}/ready`),
        ]);
        for (const res of batch) {
          statuses.push(res.status);
          await res.arrayBuffer();
        }
      }
    })();
    let terminated = 0;
    try {
      for (let round = 0; round < 6; round++) {
        const r = await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1',
          [APP],
        );
        terminated += r.rowCount ?? 0;
        await new Promise((r) => setTimeout(r, 150));
      }
    } finally {
      stop = true;
      await load;
      await admin.end();
    }
    expect(terminated).toBeGreaterThan(0);
    expect(statuses.filter((s) => ![200, 201, 503].includes(s))).toEqual([]);
    expect(instances.every(alive)).toBe(true);
    for (const instance of instances) {
      const ms = await within(
        async () => (await postSession(instance.url('auth'), 'ada')).status === 201,
        10_000,
      );
      expect(ms).toBeGreaterThanOrEqual(0);
    }
  });

  it('Redis stops: sign-in limits fall back to each instance, /ready names redis, both stay up', async () => {
    redis.closeAll();
    redis.stall();
    try {
      for (const instance of instances) {
        const started = Date.now();
        expect((await postSession(instance.url('auth'), 'ada')).status).toBe(201);
        expect(Date.now() - started).toBeLessThan(500 + MARGIN_MS);
        const ready = await fetch(`${instance.url('api')}/ready`);
        // Both stay in rotation: taking them out for Redis would stop the service for a rate-limit counter.
        expect(ready.status).toBe(200);
        expect(await ready.json()).toEqual({
          status: 'degraded',
          checks: { database: 'up', database_writes: 'up', redis: 'down' },
        });
      }
      // Each instance counts in its own memory now: ten failures on one leave the other's budget whole.
      const username = `victim-${randomBytes(4).toString('hex')}`;
      for (let i = 0; i < PER_USERNAME; i++)
        expect((await postSession(instances[0]!.url('auth'), username, 'x')).status).toBe(401);
      expect((await postSession(instances[0]!.url('auth'), username, 'x')).status).toBe(429);
      expect((await postSession(instances[1]!.url('auth'), username, 'x')).status).toBe(401);
      expect(instances.every(alive)).toBe(true);
      for (const instance of instances) {
        const warnings = instance.lines.filter(
          (l) => l['msg'] === 'redis (rate limits fall back to memory) unavailable',
        );
        expect(warnings).toHaveLength(1);
      }
    } finally {
      redis.resume();
    }
    for (const instance of instances) {
      // Redis answers each instance's readiness again (`ready`, where it was `degraded`).
      const ms = await within(() => readyInFull(instance.url('api')), 10_000);
      expect(ms).toBeGreaterThanOrEqual(0);
    }
  });
});
