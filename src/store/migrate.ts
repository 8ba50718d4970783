import { type Kysely, type Migration, type MigrationResult, Migrator, PostgresAdapter, sql } from 'kysely';
import * as m0001 from './migrations/0001-users-sessions-keys.js';
import * as m0002 from './migrations/0002-agencies-connections.js';
import * as m0003 from './migrations/0003-refresh-token-expiry-index.js';
import * as m0004 from './migrations/0004-one-connection-per-app.js';
import * as m0005 from './migrations/0005-refresh-token-families.js';
import * as m0006 from './migrations/0006-session-expiry-index.js';
import * as m0007 from './migrations/0007-pending-connection-expiry-index.js';
import type { Database } from './schema.js';

/** Versioned migrations, in order. A migration, once released, is never edited: add a new one. */
const migrations: Record<string, Migration> = {
  '0001-users-sessions-keys': m0001,
  '0002-agencies-connections': m0002,
  '0003-refresh-token-expiry-index': m0003,
  '0004-one-connection-per-app': m0004,
  '0005-refresh-token-families': m0005,
  '0006-session-expiry-index': m0006,
  '0007-pending-connection-expiry-index': m0007,
};

/**
 * Applies pending migrations, all in one transaction on either engine (on SQLite through database.ts's
 * `EmbeddedDialect`): a process stopped partway leaves none of them applied. On PostgreSQL, Kysely's lock table
 * serializes processes starting together. On SQLite Kysely takes no lock (its adapter assumes one connection), but the
 * transaction begins `IMMEDIATE` (database.ts): a second process starting on the same file waits for the first's
 * migrations, for at most the store's lock wait, then sees them applied. A migration longer than that wait fails the
 * second with SQLite's busy error; its transaction rolls back whole, so it tries again.
 */
export async function migrateToLatest(db: Kysely<Database>): Promise<MigrationResult[]> {
  const sqlite = !(db.getExecutor().adapter instanceof PostgresAdapter);
  for (let attempt = 1; ; attempt++) {
    try {
      return await migrate(db, (migrator) => migrator.migrateToLatest());
    } catch (e) {
      if (!sqlite || e instanceof UnknownMigrations || attempt >= SQLITE_MIGRATION_ATTEMPTS) throw e;
      await new Promise((resolve) => setTimeout(resolve, 50 * attempt));
    }
  }
}

const SQLITE_MIGRATION_ATTEMPTS = 10;

/** Migrates up (or down) to the named migration: for tests of a migration over data of the schema before it. */
export async function migrateTo(db: Kysely<Database>, name: string): Promise<MigrationResult[]> {
  return migrate(db, (migrator) => migrator.migrateTo(name));
}

/**
 * The database holds migrations this build does not have: a newer build migrated it (a rolled-back deploy, an
 * instance of the previous release restarting during a rollout), or another branch's. Kysely's own message read as
 * damage ("corrupted migrations: previously executed migration 0006-… is missing"); the build refuses to run against a
 * schema it does not know either way, changing nothing, and says what to do.
 */
export class UnknownMigrations extends Error {
  override name = 'UnknownMigrations';
}

/** Throws UnknownMigrations when the database records a migration this build does not have. */
async function refuseUnknownMigrations(db: Kysely<Database>): Promise<void> {
  let applied: string[];
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    applied = rows.map((r) => r.name);
  } catch {
    // No bookkeeping table yet (a new database), or the database failed the read: the migrator, next, makes the
    // table or meets the same failure and reports it.
    return;
  }
  const unknown = applied.filter((name) => !Object.hasOwn(migrations, name));
  if (unknown.length === 0) return;
  throw new UnknownMigrations(
    `the database has migrations this build of svc does not (${unknown.join(', ')}): a newer build applied them. ` +
      'Run that build or a newer one, or restore a backup from before them; nothing was changed',
  );
}

async function migrate(
  db: Kysely<Database>,
  run: (migrator: Migrator) => ReturnType<Migrator['migrateToLatest']>,
): Promise<MigrationResult[]> {
  await refuseUnknownMigrations(db);
  const migrator = new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    ...(await migrationTableSchema(db)),
  });
  const { error, results } = await run(migrator);
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return results ?? [];
}

/**
 * On PostgreSQL, keep Kysely's bookkeeping tables in the schema the connection works in (its `search_path`).
 * Left to itself the migrator looks for them in every schema, so a second deployment (or test) sharing the
 * database would see another schema's lock table and never create its own.
 */
async function migrationTableSchema(db: Kysely<Database>): Promise<{ migrationTableSchema?: string }> {
  if (!(db.getExecutor().adapter instanceof PostgresAdapter)) return {};
  const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(db);
  return { migrationTableSchema: rows[0]!.schema };
}
