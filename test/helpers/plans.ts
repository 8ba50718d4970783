import { sql } from 'kysely';
import type { Store } from '../../src/store/database.js';

/** A statement's parameter: its PostgreSQL type and the literal that stands for it when the plan is explained. */
export type PlanParameter = [type: string, literal: string];

/**
 * The plan of a prepared statement's `text` (`$1, $2...` placeholders) on the store's engine, as text. On SQLite,
 * `EXPLAIN QUERY PLAN` with the literals in place (no statistics, as the service runs it). On PostgreSQL, the generic
 * plan that a named statement may keep for a connection's life (`plan_cache_mode = force_generic_plan`), as JSON;
 * the connection's setting is restored whatever happens.
 */
export async function queryPlan(
  store: Store,
  text: string,
  params: readonly PlanParameter[],
): Promise<string> {
  if (store.engine === 'sqlite') {
    const literal = text.replace(/\$(\d+)/g, (_, n: string) => params[Number(n) - 1]![1]);
    const { rows } = await sql.raw<{ detail: string }>(`EXPLAIN QUERY PLAN ${literal}`).execute(store.db);
    return rows.map((r) => r.detail).join('; ');
  }
  return store.db.connection().execute(async (db) => {
    await sql`SET plan_cache_mode = force_generic_plan`.execute(db);
    try {
      await sql.raw(`PREPARE explained (${params.map((p) => p[0]).join(', ')}) AS ${text}`).execute(db);
      try {
        // Without ANALYZE: the plan only, nothing run or written.
        const { rows } = await sql
          .raw<{ 'QUERY PLAN': unknown }>(
            `EXPLAIN (FORMAT JSON) EXECUTE explained (${params.map((p) => p[1]).join(', ')})`,
          )
          .execute(db);
        return JSON.stringify(rows[0]!['QUERY PLAN']);
      } finally {
        await sql`DEALLOCATE explained`.execute(db);
      }
    } finally {
      await sql`RESET plan_cache_mode`.execute(db);
    }
  });
}

/**
 * The indexes through which a PostgreSQL plan (`queryPlan`'s JSON) reads `refresh_tokens`, one entry per read: an index
 * scan's index, each index of a bitmap scan, `Seq Scan` for a scan of the table.
 */
export function refreshTokenReads(plan: string): string[] {
  interface Node {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    Plans?: Node[];
  }
  const reads: string[] = [];
  const indexesUnder = (node: Node): string[] => [
    ...(node['Index Name'] ? [node['Index Name']] : []),
    ...(node.Plans ?? []).flatMap(indexesUnder),
  ];
  const walk = (node: Node) => {
    if (node['Relation Name'] === 'refresh_tokens') {
      if (node['Node Type'] === 'Seq Scan') reads.push('Seq Scan');
      else if (node['Node Type'] === 'Bitmap Heap Scan') reads.push(...indexesUnder(node));
      else if (node['Index Name']) reads.push(node['Index Name']);
    }
    node.Plans?.forEach(walk);
  };
  for (const { Plan } of JSON.parse(plan) as { Plan: Node }[]) walk(Plan);
  return reads;
}
