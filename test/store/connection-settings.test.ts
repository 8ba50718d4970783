import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openStore, type Store } from '../../src/store/database.js';
import { freshDatabase } from '../helpers/harness.js';

/**
 * A new PostgreSQL connection gets its bounds (statement_timeout, idle_in_transaction_session_timeout) before its
 * first statement, with nothing queued behind them: pg 8 warns once per process of a query sent while another runs
 * on the same client (pg 9 removes it), so this file opens the first connection of its process. Always PostgreSQL.
 */

let store: Store;
let drop: () => Promise<void>;
const warnings: Error[] = [];
const collect = (w: Error) => warnings.push(w);

beforeAll(async () => {
  process.on('warning', collect);
  const db = await freshDatabase('postgres');
  drop = db.drop;
  store = openStore({
    databaseUrl: db.env['DATABASE_URL']!,
    dataDir: '/nonexistent',
    databasePoolSize: 2,
    databaseStatementTimeoutMs: 700,
  });
});
afterAll(async () => {
  process.off('warning', collect);
  await store?.close();
  await drop?.();
});

const BOUNDS = `select current_setting('statement_timeout') as statement,
                        current_setting('idle_in_transaction_session_timeout') as idle`;
const SET = { statement: '700ms', idle: '1400ms' };

it("a new connection's first statement runs with the bounds set, and pg is never sent two queries at once", async () => {
  // Two at once, each on a connection of its own opened for it: through the hot paths' statements (pool.query)…
  expect(await Promise.all([store.sql.rows(BOUNDS, []), store.sql.rows(BOUNDS, [])])).toEqual([[SET], [SET]]);
  // …and through Kysely, which takes a connection of the pool.
  expect((await sql.raw(BOUNDS).execute(store.db)).rows).toEqual([SET]);
  // Warnings are emitted on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
  expect(warnings.map((w) => w.message)).toEqual([]);
});
