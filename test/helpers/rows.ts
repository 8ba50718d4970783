import type { Insertable, Kysely } from 'kysely';
import type { ConnectionsTable, Database } from '../../src/store/schema.js';

/**
 * A connection row for tests of the store layer: active, never used, granting `agency:mcp:read` for the agency MCP
 * resource, expiring a day after `now`; `o` names what a test cares about.
 */
export function connectionRow(
  o: Pick<Insertable<ConnectionsTable>, 'id' | 'user_id' | 'client_id'> &
    Partial<Insertable<ConnectionsTable>>,
  now: number,
): Insertable<ConnectionsTable> {
  return {
    agency_id: null,
    member_id: null,
    resource: 'https://agency.example/mcp',
    scopes: 'agency:mcp:read',
    ceiling: '',
    status: 'active',
    created_at: now,
    last_used_at: null,
    expires_at: now + 86_400_000,
    revoked_at: null,
    revoke_reason: null,
    ...o,
  };
}

/**
 * Another session holding the `refresh_tokens` rows of `hashes` (`FOR UPDATE`, in a transaction of its own) until
 * `release`: an operator's open transaction, or another instance in the middle of rotating them. `release` ends the
 * transaction and may be called more than once.
 */
export async function holdRefreshTokenRows(
  db: Kysely<Database>,
  hashes: readonly string[],
): Promise<{ release(): Promise<void> }> {
  let releaseLocks!: () => void;
  const held = new Promise<void>((resolve) => (releaseLocks = resolve));
  let locked!: () => void;
  const taken = new Promise<void>((resolve) => (locked = resolve));
  const holder = db.transaction().execute(async (trx) => {
    await trx.selectFrom('refresh_tokens').select('hash').where('hash', 'in', hashes).forUpdate().execute();
    locked();
    await held;
  });
  await Promise.race([taken, holder]);
  return {
    async release() {
      releaseLocks();
      await holder;
    },
  };
}
