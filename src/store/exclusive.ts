import { type Kysely, PostgresAdapter, sql, type Transaction } from 'kysely';
import type { Database } from './schema.js';

/**
 * Runs `fn` in a transaction that holds an exclusive lock across processes: a transaction-scoped advisory lock on
 * PostgreSQL, the database's write lock on SQLite (every transaction there begins `IMMEDIATE`: database.ts). For
 * once-only work that several processes may start together (first keys, the demo seed); keep `fn` short and free of
 * slow work, which belongs before it.
 */
export function withExclusiveLock<T>(
  db: Kysely<Database>,
  lockKey: number,
  fn: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return db.transaction().execute(async (trx) => {
    if (trx.getExecutor().adapter instanceof PostgresAdapter) {
      await sql`select pg_advisory_xact_lock(${lockKey})`.execute(trx);
    }
    return fn(trx);
  });
}

/** Fixed advisory-lock keys of the once-only work (arbitrary, distinct). */
export const LOCK_KEYS = { demoSeed: 741_100_001, firstSigningKey: 741_100_002 } as const;
