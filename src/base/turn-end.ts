/**
 * The end of the event loop's current turn: one promise shared by every answer that waits for it in that turn, and
 * the work that must come after those answers.
 *
 * Why: answers that wait for it are written back to back, once every request that arrived in the turn has been
 * worked out, instead of one by one between them. A socket write to a reader that sleeps wakes it, and the kernel
 * charges that wake-up to the writer: on loopback, and for a proxy, load balancer or sidecar on the same host, it was
 * most of the socket write that took a quarter of an agency tool call's CPU (`perf`: `sock_def_readable`). Written
 * one by one, each after ~100 µs of work, the answers find their reader asleep every time; written back to back,
 * only the first does (docs/performance.md, lever 39). The wait adds no latency of its own under load: the turn ends
 * right after its last request (Node's "check" phase follows the "poll" phase that read them).
 *
 * The statements that calls share on PostgreSQL leave here too (store/coalesce.ts), so that a turn's calls go in one,
 * and the embedded database's group commit runs after the turn's answers (store/prepared.ts).
 */
let pending: Promise<void> | undefined;

/** Resolves at the end of this turn (`setImmediate`), for every caller of the turn at once. */
export function endOfTurn(): Promise<void> {
  pending ??= new Promise((resolve) => {
    setImmediate(() => {
      pending = undefined;
      resolve();
    });
  });
  return pending;
}

/**
 * Runs `fn` at the end of this turn, after the answers that wait for it there: what must happen by the turn's end but
 * need not delay an answer (the store's shared read transaction ends here, so its COMMIT is not paid between a
 * request and its answer: +12 µs per call on one connection, measured). The answers' continuations are queued when
 * the turn's promise resolves, in the order they began waiting; `fn` is queued behind them all from there. An answer
 * that waits on something else after the turn's end is written after `fn`, no worse than before.
 */
export function afterTurnAnswers(fn: () => void): void {
  void endOfTurn().then(() => queueMicrotask(fn));
}
