import type { Insertable } from 'kysely';
import type { ConnectionsTable } from '../../src/store/schema.js';

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
