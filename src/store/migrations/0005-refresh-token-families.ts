import type { Kysely } from 'kysely';

/**
 * Refresh-token families (domain/refresh-tokens.ts): every token of a family carries the family's tag, and each row
 * stores the tag's hash, so a rotated token whose row was pruned is still recognised as its family's, and its reuse
 * still ends the connection. Rows of tokens issued before this migration have no family and are kept until they
 * expire, as before.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any -- migrations are frozen in time and must not follow the live schema type
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('refresh_tokens').addColumn('family', 'text').execute();
  await db.schema.createIndex('refresh_tokens_family').on('refresh_tokens').column('family').execute();
}
