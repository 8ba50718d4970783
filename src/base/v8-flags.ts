import { setFlagsFromString } from 'node:v8';

/**
 * V8 settings the service's process runs with, applied where every surface's server is made (`createServer` in
 * http/server.ts, beside base/tick-shape.ts), before any of them answers: however the servers are started.
 *
 * `--no-allocation-site-pretenuring`: V8 (11.3, Node 20) watches each allocation site's objects at its young-generation
 * collections, and when nearly all of those it sees are still alive it "tenures" the site: its objects are from then on
 * made in the old generation directly. Under load on PostgreSQL, sites on the refresh rotation's path were tenured
 * (`--trace-pretenuring`). An object made in the old generation keeps the young objects it points to alive through
 * every young collection until the next full one, whether anything still refers to it or not: at 20 chains ~0.6 MB
 * was promoted per collection, each took 3–5 ms instead of ~1.5, and full collections followed. Without pretenuring,
 * an object that does live long is copied once more before it is promoted. Measured: docs/performance.md, lever 38.
 */
export const V8_FLAGS = ['--no-allocation-site-pretenuring'] as const;

/** Applies V8_FLAGS to this process (again: no change); before load, since the heap decides under load. */
export function applyV8Flags(): void {
  for (const flag of V8_FLAGS) setFlagsFromString(flag);
}
