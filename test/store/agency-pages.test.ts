import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIST_CLIENTS, listClients } from '../../src/domain/agency-records.js';
import type { Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { ENGINE, freshStore } from '../helpers/harness.js';
import { type PlanParameter, queryPlan } from '../helpers/plans.js';

/**
 * The agency `list_clients` page (domain/agency-records.ts) on the suite's engine: keyset pages of one agency's
 * clients, never a neighbour's, and on PostgreSQL read from the agency's index by any plan, the generic one included.
 */
describe(`the page of an agency's clients (${ENGINE})`, () => {
  let store: Store;
  let close: () => Promise<void>;
  // Three agencies whose ids sort a < b < c, so that b's page has neighbours on both sides of its range.
  const AGENCIES = ['agy_pages_a', 'agy_pages_b', 'agy_pages_c'];
  const LARGE = 3000;

  beforeAll(async () => {
    ({ store, close } = await freshStore());
    await migrateToLatest(store.db);
    await store.db
      .insertInto('agencies')
      .values(AGENCIES.map((id) => ({ id, name: id, plan: 'team', agent_write_enabled: 1, created_at: 0 })))
      .execute();
    const client = (agency: string, i: number) => ({
      id: `cli_${agency.slice(-1)}_${String(i).padStart(5, '0')}`,
      agency_id: agency,
      name: `client ${i}`,
      email: null,
      status: 'active',
      created_at: 0,
      updated_at: 0,
    });
    // a and c are large, b small: the case where a plan that walks the primary key would read a's and c's rows.
    for (const agency of ['agy_pages_a', 'agy_pages_c']) {
      for (let start = 0; start < LARGE; start += 500) {
        const batch = Array.from({ length: 500 }, (_, i) => client(agency, start + i));
        await store.db.insertInto('clients').values(batch).execute();
      }
    }
    await store.db
      .insertInto('clients')
      .values([2, 0, 1].map((i) => client('agy_pages_b', i)))
      .execute();
    if (store.engine === 'postgres') await sql`ANALYZE clients`.execute(store.db);
  });
  afterAll(() => close?.());

  const ids = async (agency: string, after: string | undefined, take: number) =>
    (await listClients(store.sql, agency, after, take)).map((c) => c.id);

  it("pages one agency's clients in id order, and only that agency's", async () => {
    expect(await ids('agy_pages_b', undefined, 10)).toEqual(['cli_b_00000', 'cli_b_00001', 'cli_b_00002']);
    expect(await ids('agy_pages_b', 'cli_b_00000', 1)).toEqual(['cli_b_00001']);
    expect(await ids('agy_pages_b', 'cli_b_00002', 10)).toEqual([]);
    // After the last id of a neighbour, before its own first: still only the agency's own.
    expect(await ids('agy_pages_b', 'cli_a_99999', 10)).toEqual([
      'cli_b_00000',
      'cli_b_00001',
      'cli_b_00002',
    ]);
    expect(await ids('agy_pages_a', 'cli_a_01000', 3)).toEqual(['cli_a_01001', 'cli_a_01002', 'cli_a_01003']);
    expect(await ids('agy_pages_a', 'cli_a_02998', 10)).toEqual(['cli_a_02999']);
    expect(await ids('agy_pages_none', undefined, 10)).toEqual([]);
  });

  it("is read as one range of the agency's index, on PostgreSQL by the generic plan of a named statement too", async () => {
    const page: PlanParameter[] = [
      ['text', "'agy_pages_b'"],
      ['text', "''"],
      ['bigint', '51'],
    ];
    const plan = await queryPlan(store, LIST_CLIENTS[store.engine], page);
    if (store.engine === 'sqlite')
      expect(plan).toContain('USING INDEX clients_agency_id (agency_id=? AND id>?)');
    else expect(plan).toContain('"Index Name":"clients_agency_id"');
    expect(plan).not.toContain('clients_pkey');
  });
});
