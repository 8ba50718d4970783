import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect } from 'kysely';
import pg from 'pg';
import type { Config } from '../config/config.js';
import type { Database } from './schema.js';

export type Engine = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<Database>;
  engine: Engine;
  close(): Promise<void>;
}

const PG_INT8 = 20;

/** Opens the configured engine: PostgreSQL when DATABASE_URL is set, else a SQLite file in DATA_DIR (WAL). */
export function openStore(config: Pick<Config, 'databaseUrl' | 'dataDir' | 'databasePoolSize'>): Store {
  const db = config.databaseUrl
    ? new Kysely<Database>({
        dialect: new PostgresDialect({ pool: postgresPool(config.databaseUrl, config.databasePoolSize) }),
      })
    : new Kysely<Database>({ dialect: new SqliteDialect({ database: sqliteFile(config.dataDir) }) });
  return { db, engine: config.databaseUrl ? 'postgres' : 'sqlite', close: () => db.destroy() };
}

function postgresPool(connectionString: string, max: number): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    // Times are epoch milliseconds in bigint columns; they fit a JS number exactly.
    types: {
      getTypeParser: (oid, format) => (oid === PG_INT8 ? Number : pg.types.getTypeParser(oid, format)),
    },
  });
  // An idle client's error (the server restarted) must not crash the process; the pool replaces the client.
  pool.on('error', () => {});
  return pool;
}

function sqliteFile(dataDir: string): SQLite.Database {
  mkdirSync(dataDir, { recursive: true });
  const database = new SQLite(join(dataDir, 'svc.sqlite'));
  database.pragma('journal_mode = WAL');
  database.pragma('synchronous = NORMAL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  cachePreparedStatements(database);
  return database;
}

/** Distinct SQL texts are few (the queries are code), so the cache is bounded only as a guard against a bug. */
const STATEMENT_CACHE_LIMIT = 500;

/**
 * Kysely's SQLite driver prepares every query anew; preparing costs more than running a point read. Statements are
 * reusable, so keep them by SQL text. Safe because the driver only calls `all` or `run`, which finish synchronously.
 */
function cachePreparedStatements(database: SQLite.Database): void {
  const prepare = database.prepare.bind(database);
  const cache = new Map<string, SQLite.Statement>();
  database.prepare = ((sql: string) => {
    let statement = cache.get(sql);
    if (!statement) {
      statement = prepare(sql);
      if (cache.size < STATEMENT_CACHE_LIMIT) cache.set(sql, statement);
    }
    return statement;
  }) as typeof database.prepare;
}
