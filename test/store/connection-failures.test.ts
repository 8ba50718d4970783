import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/database.js';
import { freshDatabase } from '../helpers/harness.js';
import { TcpForwarder } from '../helpers/tcp-forwarder.js';

/**
 * PostgreSQL connections that die without a word, as after a failover: the old sockets go silent (no reset), new
 * connections work. Always against PostgreSQL (through a TCP forwarder; the machine's server is never touched).
 */

let forwarder: TcpForwarder;
let store: Store;
let drop: () => Promise<void>;

beforeAll(async () => {
  const db = await freshDatabase('postgres');
  drop = db.drop;
  const behind = await TcpForwarder.before(db.env['DATABASE_URL']!);
  forwarder = behind.forwarder;
  store = openStore({
    databaseUrl: behind.url,
    dataDir: '/nonexistent',
    databasePoolSize: 1,
    databaseConnectTimeoutMs: 1000,
    databaseStatementTimeoutMs: 300,
  });
});
afterAll(async () => {
  await store?.close();
  await forwarder?.close();
  await drop?.();
});

const ping = () => sql<{ one: number }>`select 1 as one`.execute(store.db);

describe('a pooled connection whose socket went silent', () => {
  it('fails its query once within the bound, and is not handed out again', async () => {
    expect((await ping()).rows).toEqual([{ one: 1 }]);
    forwarder.blackholeOpen();
    const started = Date.now();
    await expect(ping()).rejects.toThrow(/timeout/i);
    expect(Date.now() - started).toBeLessThan(5000); // statement timeout + 1 s, with a wide margin
    // The pool holds one connection: had the dead one gone back as healthy, this would time out again.
    expect((await ping()).rows).toEqual([{ one: 1 }]);
  });

  it('a statement the server cancels leaves the connection in use', async () => {
    const backend = async () =>
      (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(store.db)).rows[0]!.pid;
    const before = await backend();
    await expect(sql`select pg_sleep(2)`.execute(store.db)).rejects.toThrow(/statement timeout/);
    expect((await ping()).rows).toEqual([{ one: 1 }]);
    // The same backend: the pool (of one) kept the connection instead of opening a new one.
    expect(await backend()).toBe(before);
  });
});
