import { type Kysely, sql } from 'kysely';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  // The hourly prune deletes consents whose code was never exchanged by their expiry (domain/pruning.ts). Without an
  // index it read every connection: 66 ms with a million on the embedded database, the event loop held meanwhile. Only
  // pending rows are indexed, so a connection's other writes pay nothing. A partial index: the same statement on
  // SQLite and PostgreSQL (as 0004).
  await sql`CREATE INDEX connections_pending_expiry ON connections (expires_at) WHERE status = 'pending'`.execute(
    db,
  );
}
