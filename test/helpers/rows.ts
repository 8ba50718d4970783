import { sql, type Insertable, type Kysely } from 'kysely';
import type { ConnectionsTable, Database } from '../../src/store/schema.js';
import { within } from './ops.js';

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
 * transaction and may be called more than once. `waitForWaiters(n)` returns once `n` statements wait on these rows
 * (PostgreSQL's `pg_blocking_pids`), so that a test knows a statement it started holds its connection; it fails after
 * 5 s.
 */
export async function holdRefreshTokenRows(
  db: Kysely<Database>,
  hashes: readonly string[],
): Promise<{ release(): Promise<void>; waitForWaiters(count: number): Promise<void> }> {
  let releaseLocks!: () => void;
  const held = new Promise<void>((resolve) => (releaseLocks = resolve));
  let locked!: () => void;
  const taken = new Promise<void>((resolve) => (locked = resolve));
  let holderPid: number | undefined;
  const holder = db.transaction().execute(async (trx) => {
    holderPid = (await sql<{ pid: number }>`SELECT pg_backend_pid() AS pid`.execute(trx)).rows[0]!.pid;
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
    async waitForWaiters(count) {
      const waiting = async () => {
        const { rows } = await sql<{ waiting: number }>`SELECT count(*)::int AS waiting FROM pg_stat_activity
          WHERE ${holderPid} = ANY (pg_blocking_pids(pid))`.execute(db);
        return rows[0]!.waiting >= count;
      };
      if ((await within(waiting, 5000)) < 0)
        throw new Error(`${count} statements did not come to wait on the held rows in 5 s`);
    },
  };
}

/** Whether the agency allows agent writes now, as its row says (0 or 1). */
export async function agentWriteEnabled(db: Kysely<Database>, agencyId: string): Promise<number> {
  const row = await db
    .selectFrom('agencies')
    .select('agent_write_enabled')
    .where('id', '=', agencyId)
    .executeTakeFirstOrThrow();
  return row.agent_write_enabled;
}

/** The audit events written about one connection, by type, oldest first. */
export async function auditTypesOf(db: Kysely<Database>, connectionId: string): Promise<string[]> {
  const rows = await db
    .selectFrom('audit_events')
    .select('type')
    .where('connection_id', '=', connectionId)
    .orderBy('id')
    .execute();
  return rows.map((r) => r.type);
}
