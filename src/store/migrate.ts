import { type Kysely, type Migration, type MigrationResult, Migrator } from 'kysely';
import * as m0001 from './migrations/0001-users-sessions-keys.js';
import type { Database } from './schema.js';

/** Versioned migrations, in order. A migration, once released, is never edited: add a new one. */
const migrations: Record<string, Migration> = {
  '0001-users-sessions-keys': m0001,
};

export async function migrateToLatest(db: Kysely<Database>): Promise<MigrationResult[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return results ?? [];
}
