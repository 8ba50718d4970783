import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '../../src/base/clock.js';
import { seedDemo } from '../../src/domain/demo-seed.js';
import type { Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { freshStore } from '../helpers/harness.js';

/**
 * The demo seed makes an agency's records with ordered ids, as the write tools do (base/ids.ts, `newOrderedId`):
 * in the order they were inserted, their ids sort. On SQLite, whose rowid gives the order of insertion.
 */
describe('demo seed (sqlite, on every run)', () => {
  let store: Store;
  let close: () => Promise<void>;
  beforeAll(async () => {
    ({ store, close } = await freshStore('sqlite'));
    await migrateToLatest(store.db);
    await seedDemo(store.db, systemClock, false);
  });
  afterAll(() => close?.());

  it.each(['clients', 'projects', 'tasks'])(
    'gives %s ids that sort in the order they were made',
    async (table) => {
      const { rows } = await sql<{ id: string }>`SELECT id FROM ${sql.table(table)} ORDER BY rowid`.execute(
        store.db,
      );
      const ids = rows.map((r) => r.id);
      // Three clients, four projects, seven tasks: random ids would come out sorted one time in 6, 24 or 5,040.
      expect(ids.length).toBeGreaterThanOrEqual(3);
      expect(ids).toEqual([...ids].sort());
    },
  );
});
