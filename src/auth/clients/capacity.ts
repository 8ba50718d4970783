import type { Kysely } from 'kysely';
import type { Clock } from '../../base/clock.js';
import type { Database } from '../../store/schema.js';

/** The store has no room for another client of this kind, even after pruning. */
export class ClientCapacityError extends Error {
  override name = 'ClientCapacityError';
}

/**
 * Makes room for one more stored client of a self-registered kind (DCR or CIMD): prunes never-used clients past their
 * time, then the oldest never-used ones while at the cap; throws ClientCapacityError when only used clients remain.
 * Anyone can create such clients without signing in, so their number must be bounded (docs/security.md).
 */
export async function makeRoomForClient(
  db: Kysely<Database>,
  clock: Clock,
  kind: 'dcr' | 'cimd',
  o: { maxClients: number; unusedTtlSeconds: number },
): Promise<void> {
  const neverUsed = () =>
    db.deleteFrom('oauth_clients').where('kind', '=', kind).where('last_used_at', 'is', null);
  await neverUsed().where('created_at', '<', clock.now() - o.unusedTtlSeconds * 1000).execute();
  const count = async () =>
    Number(
      (
        await db
          .selectFrom('oauth_clients')
          .select((eb) => eb.fn.countAll().as('n'))
          .where('kind', '=', kind)
          .executeTakeFirstOrThrow()
      ).n,
    );
  let n = await count();
  while (n >= o.maxClients) {
    const oldest = await db
      .selectFrom('oauth_clients')
      .select('client_id')
      .where('kind', '=', kind)
      .where('last_used_at', 'is', null)
      .orderBy('created_at')
      .limit(Math.min(100, n - o.maxClients + 1))
      .execute();
    if (oldest.length === 0) throw new ClientCapacityError(`no room for another ${kind} client`);
    await db
      .deleteFrom('oauth_clients')
      .where(
        'client_id',
        'in',
        oldest.map((row) => row.client_id),
      )
      .execute();
    n = await count();
  }
}
