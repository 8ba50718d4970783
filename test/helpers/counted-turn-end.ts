import type * as TurnEndModule from '../../src/base/turn-end.js';

/**
 * base/turn-end.ts with `endOfTurn` counted in `counter.count`: every fast-path answer waits for the turn's end, so
 * that a turn's answers are written together; what Fastify or the SDK answers does not. For `vi.mock`. The store's
 * shared read and the embedded database's group commit wait through the module's own `afterTurnAnswers`, which this
 * does not count; the refresh rotations' shared statements on PostgreSQL (store/coalesce.ts) wait for it too, which no
 * test counting it makes.
 */
export function countedTurnEnd(
  original: typeof TurnEndModule,
  counter: { count: number },
): typeof TurnEndModule {
  return {
    ...original,
    endOfTurn: () => {
      counter.count++;
      return original.endOfTurn();
    },
  };
}

/** The status of what `request` answered, and how many answers waited for the turn's end meanwhile. */
export async function waitsOf(
  counter: { count: number },
  request: () => Promise<Response>,
): Promise<{ status: number; waits: number }> {
  const before = counter.count;
  const res = await request();
  await res.text();
  return { status: res.status, waits: counter.count - before };
}
