import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Store } from '../../src/store/database.js';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { ENGINE, freshStore } from '../helpers/harness.js';

/** Migrations over data written by the schema before them. */

let store: Store;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ store, close } = await freshStore());
});
afterAll(() => close?.());

describe(`0004 one connection per app (${ENGINE})`, () => {
  it('folds duplicate active connections of one app into the newest, keeping every token family', async () => {
    const db = store.db;
    await migrateTo(db, '0003-refresh-token-expiry-index');
    await db
      .insertInto('users')
      .values({
        id: 'usr_1',
        username: 'ada',
        image_url: null,
        password_hash: 'x',
        api_version: null,
        created_at: 0,
      })
      .execute();
    await db
      .insertInto('agencies')
      .values({ id: 'agy_1', name: 'N', plan: 'pro', agent_write_enabled: 1, created_at: 0 })
      .execute();
    await db
      .insertInto('members')
      .values({
        id: 'mem_1',
        agency_id: 'agy_1',
        user_id: 'usr_1',
        role: 'owner',
        status: 'active',
        created_at: 0,
        removed_at: null,
      })
      .execute();
    const connection = (id: string, createdAt: number, scopes: string, clientId = 'app') => ({
      id,
      user_id: 'usr_1',
      agency_id: 'agy_1',
      member_id: 'mem_1',
      client_id: clientId,
      resource: 'https://mcp.example/mcp',
      scopes,
      ceiling: 'clients:read',
      status: 'active' as const,
      created_at: createdAt,
      last_used_at: null,
      expires_at: createdAt + 1000,
      revoked_at: null,
      revoke_reason: null,
    });
    await db
      .insertInto('connections')
      .values([
        connection('con_old', 1, 'agency:mcp:read offline_access'),
        connection('con_new', 2, 'agency:mcp:read agency:mcp:write offline_access'),
        connection('con_other', 1, 'agency:mcp:read', 'other-app'),
      ])
      .execute();
    const family = (hash: string, connectionId: string) => ({
      hash,
      connection_id: connectionId,
      parent_hash: null,
      successor_salt: 's',
      scope: 'agency:mcp:read offline_access',
      issued_at: 1,
      rotated_at: null,
      expires_at: 10_000,
    });
    await db
      .insertInto('refresh_tokens')
      .values([family('h_old', 'con_old'), family('h_new', 'con_new')])
      .execute();

    await migrateToLatest(db);

    const rows = await db
      .selectFrom('connections')
      .select(['id', 'status', 'revoke_reason'])
      .orderBy('id')
      .execute();
    expect(rows).toEqual([
      { id: 'con_new', status: 'active', revoke_reason: null },
      { id: 'con_old', status: 'revoked', revoke_reason: 'merged' },
      { id: 'con_other', status: 'active', revoke_reason: null },
    ]);
    const families = await db
      .selectFrom('refresh_tokens')
      .select(['hash', 'connection_id'])
      .orderBy('hash')
      .execute();
    expect(families).toEqual([
      { hash: 'h_new', connection_id: 'con_new' },
      { hash: 'h_old', connection_id: 'con_new' },
    ]);
    // The unique index now keeps it so: a second active connection of the same app is refused.
    await expect(
      db.updateTable('connections').set({ status: 'active' }).where('id', '=', 'con_old').execute(),
    ).rejects.toThrow();
  });
});

describe(`a database migrated by a newer build (${ENGINE})`, () => {
  it('is refused with what to do, and nothing changed, where Kysely called the migrations corrupted', async () => {
    const db = store.db;
    await migrateToLatest(db);
    const newer = '9999-from-a-newer-build';
    const applied = () =>
      db
        .selectFrom('kysely_migration' as never)
        .select('name' as never)
        .execute()
        .then((rows) => (rows as { name: string }[]).map((r) => r.name).sort());
    await db
      .insertInto('kysely_migration' as never)
      .values({ name: newer, timestamp: new Date(0).toISOString() } as never)
      .execute();
    const before = await applied();
    try {
      await expect(migrateToLatest(db)).rejects.toThrow(
        `the database has migrations this build of svc does not (${newer}): a newer build applied them. ` +
          'Run that build or a newer one, or restore a backup from before them; nothing was changed',
      );
      await expect(migrateTo(db, '0004-one-connection-per-app')).rejects.toThrow(newer);
      // Nothing was rolled back or applied: migrating to 0004 would have undone 0005 (its `family` column).
      expect(await applied()).toEqual(before);
      await db.selectFrom('refresh_tokens').select('family').limit(1).execute();
    } finally {
      await db
        .deleteFrom('kysely_migration' as never)
        .where('name' as never, '=', newer as never)
        .execute();
    }
  });
});
