import { performance } from 'node:perf_hooks';
import { endOfTurn } from '../base/turn-end.js';
import { isRefusedStatement } from './pg-errors.js';

/**
 * One statement run for many callers at once, on PostgreSQL: the calls of one turn of the event loop go to a statement
 * together at the turn's end, and calls that arrive while `concurrency` statements of theirs are in flight wait, the
 * next statement taking them together; a statement takes at most `maxItems`. Without load every call runs alone
 * (`one`), at the end of its turn; under load, the calls that would each have waited for a connection share one round
 * trip, one plan's set-up and one commit (`many`): a group commit made by the statement itself, where the embedded
 * database has its event loop's (prepared.ts).
 *
 * Why the turn's end: a call sent at once took a free connection alone, and the calls that came right after it, from
 * the same turn or the next, waited a whole statement behind it. At 20 rotation chains, 57–58 % of the statements
 * carried one rotation each, each with its own commit; sent at the turn's end, 9–16 % did, and a rotation cost ~6 %
 * less CPU, the backends' included (docs/performance.md, lever 41). The wait adds no latency of its own: the turn ends
 * right after its last request (base/turn-end.ts).
 *
 * Two calls with the same `key` are never in flight together, nor in one statement: the later waits for the earlier
 * and then sees what it wrote, as it would have behind the earlier's row lock. A shared statement gets its items in
 * key order, which makes two statements likely, though not certain (the plan decides), to lock the rows they share in
 * the same order; a deadlock between them is one of the refusals below.
 *
 * A shared statement the database refused for what it was given (pg-errors.ts: a value it cannot take, a constraint
 * it breaks, a deadlock or serialization failure) may have failed on one item's account; it was rolled back whole, and
 * is run again one item at a time (one after the other, within the group's place in flight), so that each caller gets
 * its own answer. Any other failure (the database unreachable or shutting down, out of resources, the statement
 * cancelled or timed out) is every item's: each caller gets it, as it would have from a statement of its own, and
 * nothing is run twice.
 *
 * A call waits for its statement at most `waitTimeoutMs`, the bound a query has on waiting for one of the pool's
 * connections (DATABASE_CONNECT_TIMEOUT_MS): the wait replaces that one. Past it the call fails with
 * `StatementWaitTimeout`, an outage (503 with Retry-After), and its item is never run. Without it, calls waiting behind
 * statements stuck on row locks would wait for those statements' own timeouts first.
 */
export interface CoalescedStatement<I, R> {
  /** At most this many statements in flight (PostgresPrepared.shared caps it at the pool's connections). */
  concurrency: number;
  /** At most this many items in one statement. */
  maxItems: number;
  /** How long a call may wait for its statement to start (0: as long as it takes). */
  waitTimeoutMs: number;
  /** Told of each call that waited too long (the store's watch logs the database as unavailable). */
  waitedTooLong?(error: StatementWaitTimeout): void;
  /** Items with the same key are run one after the other, never together. */
  key(item: I): string;
  one(item: I): Promise<R>;
  /** The results of `items`, in their order. */
  many(items: readonly I[]): Promise<R[]>;
}

/** A call that waited longer than `waitTimeoutMs` for its statement; nothing of it was run. */
export class StatementWaitTimeout extends Error {
  override name = 'StatementWaitTimeout';
  constructor(waitTimeoutMs: number) {
    super(`waited more than ${waitTimeoutMs} ms for a database statement to start`);
  }
}

interface Waiting<I, R> {
  item: I;
  key: string;
  /** When the call started waiting (performance.now()). */
  since: number;
  resolve(result: R): void;
  reject(error: unknown): void;
}

export function coalesced<I, R>(o: CoalescedStatement<I, R>): (item: I) => Promise<R> {
  const waiting: Waiting<I, R>[] = [];
  const inFlight = new Set<string>();
  let statements = 0;
  /** Armed for the oldest waiting call's deadline, while calls wait: one timer, not one per call. */
  let deadline: NodeJS.Timeout | undefined;

  /** Fails the calls past their deadline: the oldest are first in `waiting`, which keeps arrival order. */
  const expire = (): void => {
    deadline = undefined;
    const now = performance.now();
    while (waiting.length > 0 && now - waiting[0]!.since >= o.waitTimeoutMs) {
      const error = new StatementWaitTimeout(o.waitTimeoutMs);
      o.waitedTooLong?.(error);
      waiting.shift()!.reject(error);
    }
    armDeadline();
  };

  const armDeadline = (): void => {
    if (deadline !== undefined || waiting.length === 0 || o.waitTimeoutMs <= 0) return;
    const left = waiting[0]!.since + o.waitTimeoutMs - performance.now();
    deadline = setTimeout(expire, Math.max(0, left));
    // Pending calls keep the process busy by themselves; the timer alone must not hold it open.
    deadline.unref();
  };

  /** The waiting items the next statement can take: none whose key is in flight or already taken. */
  const takeGroup = (): Waiting<I, R>[] => {
    const group: Waiting<I, R>[] = [];
    const taken = new Set<string>();
    for (let i = 0; i < waiting.length && group.length < o.maxItems;) {
      const w = waiting[i]!;
      if (inFlight.has(w.key) || taken.has(w.key)) {
        i++;
        continue;
      }
      taken.add(w.key);
      group.push(w);
      waiting.splice(i, 1);
    }
    return group;
  };

  const pump = (): void => {
    while (statements < o.concurrency && waiting.length > 0) {
      const group = takeGroup();
      if (group.length === 0) return;
      statements++;
      for (const w of group) inFlight.add(w.key);
      void run(group)
        .catch((error: unknown) => {
          // Not expected (run settles every item itself); settling twice is harmless, leaving one pending is not.
          for (const w of group) w.reject(error);
        })
        .finally(() => {
          statements--;
          for (const w of group) inFlight.delete(w.key);
          pump();
        });
    }
  };

  /** Settles `w` whatever `one` does, a synchronous throw included. */
  const runOne = async (w: Waiting<I, R>): Promise<void> => {
    try {
      w.resolve(await o.one(w.item));
    } catch (error) {
      w.reject(error);
    }
  };

  const run = async (group: Waiting<I, R>[]): Promise<void> => {
    if (group.length === 1) return runOne(group[0]!);
    group.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    let results: R[];
    try {
      results = await o.many(group.map((w) => w.item));
    } catch (error) {
      if (!isRefusedStatement(error)) {
        for (const w of group) w.reject(error);
        return;
      }
      for (const w of group) await runOne(w);
      return;
    }
    if (results.length !== group.length) {
      // A bug of `many`: its statement ran, so nothing is run again, and no caller reads another's answer.
      const error = new Error(`a shared statement answered ${results.length} of ${group.length} items`);
      for (const w of group) w.reject(error);
      return;
    }
    group.forEach((w, i) => w.resolve(results[i]!));
  };

  /** Whether a pump is due at the end of this turn, for the calls that arrived in it. */
  let pumpDue = false;
  const pumpAtTurnEnd = (): void => {
    if (pumpDue) return;
    pumpDue = true;
    void endOfTurn().then(() => {
      pumpDue = false;
      pump();
    });
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ item, key: o.key(item), since: performance.now(), resolve, reject });
      pumpAtTurnEnd();
      armDeadline();
    });
}
