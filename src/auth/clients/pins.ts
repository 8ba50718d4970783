import type { Kysely } from 'kysely';
import type { Clock } from '../../domain/clock.js';
import type { Database } from '../../store/schema.js';

/**
 * Pins a client to an API version (or clears the pin with null), whatever its kind. Stored clients (DCR, CIMD) carry
 * the pin on their row; a pre-registered client lives in the operator's file, so its pin gets a row of its own (kind
 * `preregistered`, no metadata: the file stays the source of its metadata). Returns false for an unknown client.
 */
export async function pinClientVersion(
  db: Kysely<Database>,
  clock: Clock,
  preregistered: ReadonlySet<string>,
  clientId: string,
  version: string | null,
): Promise<boolean> {
  const { numUpdatedRows } = await db
    .updateTable('oauth_clients')
    .set({ api_version: version })
    .where('client_id', '=', clientId)
    .executeTakeFirst();
  if (numUpdatedRows > 0n) return true;
  if (!preregistered.has(clientId)) return false;
  await db
    .insertInto('oauth_clients')
    .values({
      client_id: clientId,
      kind: 'preregistered',
      metadata: '{}',
      api_version: version,
      created_at: clock.now(),
      last_used_at: null,
    })
    .onConflict((c) => c.column('client_id').doUpdateSet({ api_version: version }))
    .execute();
  return true;
}
