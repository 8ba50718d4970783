/**
 * One statement run for many callers at once, on PostgreSQL: calls that arrive while `concurrency` statements of
 * theirs are in flight wait, and the next statement takes them together, up to `maxItems`. Without load every call runs alone and at once (`one`); under load, the calls that would each have
 * waited for a connection share one round trip, one plan's set-up and one commit (`many`): a group commit made by
 * the statement itself, where the embedded database has its event loop's (prepared.ts).
 *
 * Two calls with the same `key` are never in flight together, nor in one statement: the later waits for the earlier
 * and then sees what it wrote, as it would have behind the earlier's row lock. A shared statement takes its items in
 * key order, so that two statements lock the rows they share in the same order.
 *
 * A shared statement that fails on one item's account — a constraint it breaks, a deadlock or serialization failure
 * (SQLSTATE classes 23 and 40) — is run again one item at a time, so that each caller gets its own answer. Any other
 * failure (the database unreachable, the statement timeout) is every item's: each caller gets it, as it would have
 * from a statement of its own, and nothing is run twice.
 */
export interface CoalescedStatement<I, R> {
  /** At most this many statements in flight (at most the pool's connections). */
  concurrency: number;
  /** At most this many items in one statement. */
  maxItems: number;
  /** Items with the same key are run one after the other, never together. */
  key(item: I): string;
  one(item: I): Promise<R>;
  /** The results of `items`, in their order. */
  many(items: readonly I[]): Promise<R[]>;
}

interface Waiting<I, R> {
  item: I;
  key: string;
  resolve(result: R): void;
  reject(error: unknown): void;
}

/** SQLSTATE classes of a failure caused by one of the rows a statement writes (PostgreSQL Appendix A). */
const ITEM_FAILURE_CLASSES = new Set(['23', '40']);

export function isItemFailure(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.length === 5 && ITEM_FAILURE_CLASSES.has(code.slice(0, 2));
}

export function coalesced<I, R>(o: CoalescedStatement<I, R>): (item: I) => Promise<R> {
  const waiting: Waiting<I, R>[] = [];
  const inFlight = new Set<string>();
  let statements = 0;

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
      void run(group).finally(() => {
        statements--;
        for (const w of group) inFlight.delete(w.key);
        pump();
      });
    }
  };

  const runOne = (w: Waiting<I, R>): Promise<void> => o.one(w.item).then(w.resolve, w.reject);

  const run = async (group: Waiting<I, R>[]): Promise<void> => {
    if (group.length === 1) return runOne(group[0]!);
    group.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
    let results: R[];
    try {
      results = await o.many(group.map((w) => w.item));
    } catch (error) {
      if (!isItemFailure(error)) {
        for (const w of group) w.reject(error);
        return;
      }
      await Promise.all(group.map(runOne));
      return;
    }
    group.forEach((w, i) => w.resolve(results[i]!));
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      waiting.push({ item, key: o.key(item), resolve, reject });
      pump();
    });
}
