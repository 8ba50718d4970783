import { CompiledQuery, type KyselyPlugin, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pruneExpired } from '../../src/domain/pruning.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * The hourly prune (domain/pruning.ts) finds what it deletes by an index, in every table that grows with use. A delete
 * that reads its whole table does so once an hour per instance, and on the embedded database holds the event loop
 * meanwhile: the abandoned consents' delete read every connection, 66 ms with a million of them (migration 0007).
 *
 * Each statement is recorded as the prune runs it and explained, nothing executed: on SQLite as the service plans it
 * (no statistics), where `SCAN t` reads all of t; on PostgreSQL with sequential scans priced out
 * (`enable_seqscan = off`), so that a `Seq Scan` left in the plan means no index can serve the statement.
 * `authorization_codes` may be read whole: it holds about an hour's codes (and the cascade from a deleted connection
 * reads it on SQLite).
 */

/** Tables whose size follows the service's use: connections, sessions, refresh tokens. */
const GROWING = ['connections', 'sessions', 'refresh_tokens'];

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.close());

/** The prune's statements, compiled as they ran. */
async function pruneStatements(): Promise<CompiledQuery[]> {
  const { db, clock } = server.services.ctx;
  const ran: CompiledQuery[] = [];
  const recorder: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => (ran.push(db.getExecutor().compileQuery(node, queryId)), node),
    transformResult: async ({ result }) => result,
  };
  await pruneExpired(db.withPlugin(recorder), clock);
  return ran;
}

/** The full reads of a growing table in a statement's plan. */
async function fullReads(statement: CompiledQuery): Promise<string[]> {
  const { db, store } = server.services.ctx;
  if (store.engine === 'sqlite') {
    const plan = await db.executeQuery<{ detail: string }>(
      CompiledQuery.raw(`EXPLAIN QUERY PLAN ${statement.sql}`, [...statement.parameters]),
    );
    return plan.rows
      .map((r) => r.detail)
      .filter((d) => GROWING.some((t) => new RegExp(`^SCAN ${t}\\b`).test(d)));
  }
  return db.connection().execute(async (c) => {
    await sql`SET enable_seqscan = off`.execute(c);
    try {
      const plan = await c.executeQuery<{ 'QUERY PLAN': unknown }>(
        CompiledQuery.raw(`EXPLAIN (FORMAT JSON) ${statement.sql}`, [...statement.parameters]),
      );
      interface Node {
        'Node Type': string;
        'Relation Name'?: string;
        Plans?: Node[];
      }
      const scans: string[] = [];
      const walk = (node: Node) => {
        const table = node['Relation Name'];
        if (node['Node Type'] === 'Seq Scan' && table && GROWING.includes(table))
          scans.push(`Seq Scan ${table}`);
        node.Plans?.forEach(walk);
      };
      for (const { Plan } of plan.rows[0]!['QUERY PLAN'] as { Plan: Node }[]) walk(Plan);
      return scans;
    } finally {
      await sql`RESET enable_seqscan`.execute(c);
    }
  });
}

describe(`the hourly prune reads by index (${ENGINE})`, () => {
  it('no statement of it reads a whole connections, sessions or refresh_tokens table', async () => {
    const statements = await pruneStatements();
    // Codes, refresh tokens, abandoned consents, and at least one batch of sessions.
    expect(statements.length).toBeGreaterThanOrEqual(4);
    for (const statement of statements) expect(await fullReads(statement), statement.sql).toEqual([]);
  });
});
