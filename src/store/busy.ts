import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Waiting for the embedded database's write lock off the event loop.
 *
 * SQLite's calls are synchronous, and so is its busy handler: with `busy_timeout` set, a write that finds the lock
 * held by another process (a `svc start --only` sibling on the same `DATA_DIR`, a `svc` command, a `sqlite3` shell
 * left in a transaction) sleeps inside SQLite, and nothing else in the process runs meanwhile — not `/health`, not
 * the answers served from memory. Measured with the lock held 10 s by another process: every surface stopped
 * answering for the 10 s (docs/deployment.md). So the connection's `busy_timeout` is 0 once it is open, a statement
 * that meets the lock fails at once with SQLITE_BUSY (having done nothing: a statement outside a transaction, or a
 * `BEGIN IMMEDIATE`), and it is tried again after a pause, for at most the store's wait bound, the event loop free in
 * between. The first try stays synchronous, so the path without contention is the same as before.
 */

/** Pauses between tries: short first, as a sibling's commit holds the lock for a sync of the disk (~0.2–10 ms). */
const PAUSES_MS = [1, 2, 5, 10, 20, 50, 100] as const;

/** SQLite's busy codes: SQLITE_BUSY and its extended forms (`SQLITE_BUSY_RECOVERY`, `SQLITE_BUSY_SNAPSHOT`...). */
export function isBusy(error: unknown): boolean {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_BUSY');
}

/**
 * Runs `attempt`; if the database is busy, tries it again after a pause until it runs or `waitMs` have passed (then
 * its last SQLITE_BUSY is thrown: an outage, answered 503). `attempt` must be safe to repeat after a busy failure: a
 * single statement outside a transaction, or work that begins with `BEGIN IMMEDIATE`; and it says busy by throwing,
 * as better-sqlite3's calls do (what it returns, a promise included, is handed back as it is). `pause` is how to wait:
 * a caller holding a connection others queue for hands it back while it waits.
 */
export function whileBusy<T>(
  attempt: () => T,
  waitMs: number,
  pause: (ms: number) => Promise<unknown> = sleep,
): T | Promise<T> {
  try {
    return attempt();
  } catch (e) {
    if (!isBusy(e) || waitMs <= 0) throw e;
    return tryAgain(attempt, waitMs, pause);
  }
}

async function tryAgain<T>(
  attempt: () => T,
  waitMs: number,
  pause: (ms: number) => Promise<unknown>,
): Promise<T> {
  const deadline = performance.now() + waitMs;
  for (let i = 0; ; i++) {
    const left = deadline - performance.now();
    await pause(Math.max(0, Math.min(PAUSES_MS[Math.min(i, PAUSES_MS.length - 1)]!, left)));
    try {
      return attempt();
    } catch (e) {
      if (!isBusy(e) || performance.now() >= deadline) throw e;
    }
  }
}
