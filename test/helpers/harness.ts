import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pg from 'pg';
import { pino } from 'pino';
import { type Services, type StartOptions, startServices } from '../../src/app.js';
import { type Config, knownUrl, loadConfig, type Surface } from '../../src/config/config.js';
import { ManualClock } from '../../src/base/clock.js';
import { seedDemo } from '../../src/domain/demo-seed.js';
import { openStore, type Store, type StoreWatch } from '../../src/store/database.js';

/** Which engine the suite runs on: `TEST_DATABASE=postgres` switches from the embedded database. */
export const ENGINE = process.env['TEST_DATABASE'] === 'postgres' ? 'postgres' : 'sqlite';
const PG_URL = process.env['TEST_DATABASE_URL'] ?? 'postgres://postgres@127.0.0.1:5432/test';

/** A throwaway database: a temp directory for SQLite, a fresh schema for PostgreSQL. */
export async function freshDatabase(
  engine: 'sqlite' | 'postgres' = ENGINE,
): Promise<{ env: Record<string, string>; drop(): Promise<void> }> {
  if (engine === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'svc-test-'));
    return { env: { DATA_DIR: dir }, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    env: { DATABASE_URL: url.toString(), DATA_DIR: '/nonexistent' },
    async drop() {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

/**
 * A store of its own on a fresh database (no server), for tests of the store layer; `close` also drops the database.
 * `dataDir` holds the embedded database's file (`svc.sqlite`), for a test that opens a second connection to it.
 */
export async function freshStore(
  engine: 'sqlite' | 'postgres' = ENGINE,
  watch?: StoreWatch,
): Promise<{ store: Store; dataDir: string; close(): Promise<void> }> {
  const database = await freshDatabase(engine);
  const config = loadConfig({ NODE_ENV: 'test', ...database.env });
  const store = openStore(config, watch);
  return {
    store,
    dataDir: config.dataDir,
    async close() {
      await store.close();
      await database.drop();
    },
  };
}

/** Captures the JSON log lines of the servers, so tests can read what an operator would see. */
export class LogCapture {
  readonly lines: Record<string, unknown>[] = [];
  readonly stream = new Writable({
    write: (chunk: Buffer, _enc, done) => {
      for (const line of chunk.toString().split('\n')) if (line) this.lines.push(JSON.parse(line));
      done();
    },
  });
}

export interface TestServer {
  services: Services;
  config: Config;
  /** The environment that points at this server's database. */
  database: Record<string, string>;
  clock: ManualClock;
  logs: LogCapture;
  url: { api: string; auth: string; mcp: string; agencyMcp: string };
  close(): Promise<void>;
}

export interface TestServerOptions extends Omit<StartOptions, 'clock' | 'logger'> {
  env?: Record<string, string>;
  seed?: boolean;
  /** A second instance over the database of this one (the first keeps and drops it). */
  sharing?: TestServer;
}

/** Starts real servers on ephemeral loopback ports over a fresh database. */
export async function startTestServer(o: TestServerOptions = {}): Promise<TestServer> {
  const database = o.sharing ? { env: o.sharing.database, drop: async () => {} } : await freshDatabase();
  const config = loadConfig({
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    API_PORT: '0',
    MCP_PORT: '0',
    AGENCY_MCP_PORT: '0',
    AUTH_PORT: '0',
    LOG_LEVEL: 'info',
    ...database.env,
    ...o.env,
  });
  const clock = new ManualClock();
  const logs = new LogCapture();
  const services = await startServices(config, {
    ...o,
    clock,
    logger: pino({ level: config.logLevel }, logs.stream),
    seedDemoIfEmpty: false,
  });
  if (o.seed !== false && !o.sharing) await seedDemo(services.ctx.db, clock, false);
  const u = (surface: Surface) => knownUrl(config, surface);
  return {
    services,
    config,
    database: database.env,
    clock,
    logs,
    url: { api: u('api')!, auth: u('auth')!, mcp: u('mcp') ?? '', agencyMcp: u('agency-mcp') ?? '' },
    async close() {
      await services.close();
      await database.drop();
    },
  };
}

/** Signs in through the real endpoint and returns the session token. */
export async function signIn(server: TestServer, username = 'ada', password = `${username}-demo-password`) {
  const res = await fetch(`${server.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });
  if (res.status !== 201) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
  return (await res.json()) as { object: 'session'; id: string; token: string; expires_at: string };
}

/** The id of a (seeded) user, read from the server's own database. */
export async function userId(server: TestServer, username = 'ada'): Promise<string> {
  const db = server.services.ctx.db;
  return (
    await db.selectFrom('users').select('id').where('username', '=', username).executeTakeFirstOrThrow()
  ).id;
}
