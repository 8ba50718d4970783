import { performance } from 'node:perf_hooks';

/** How often the watch looks: the least hold it can see is about this, its cost a timer this often. */
const TICK_MS = 250;
/** A hold this long or longer is logged: no request was answered for that long. */
export const EVENT_LOOP_HELD_MS = 1000;

/**
 * Logs each time the event loop was held — nothing answered, health checks included — for EVENT_LOOP_HELD_MS or
 * longer, with how long (`held_ms`), once it runs again.
 *
 * Why: the embedded database's calls are synchronous, so a disk that stalls holds the whole process with it (a stopped
 * FUSE mount held it 9.9 s, docs/deployment.md); so do CPU starvation and a long collection. prom-client's
 * `nodejs_eventloop_lag_max_seconds` shows it only where METRICS_PORT is set and someone alerts on it; the log line
 * is there on every instance, dated, next to the requests it delayed. A timer that fires late by the hold is the
 * measure: read on the monotonic clock, a wall clock set meanwhile changes nothing.
 */
export function watchEventLoop(log: { warn(fields: object, message: string): void }): () => void {
  let expected = performance.now() + TICK_MS;
  const timer = setInterval(() => {
    const now = performance.now();
    const held = now - expected;
    expected = now + TICK_MS;
    if (held >= EVENT_LOOP_HELD_MS)
      log.warn(
        { held_ms: Math.round(held) },
        'event loop held: nothing was answered meanwhile (a synchronous database call on a stalled disk, CPU starvation)',
      );
  }, TICK_MS);
  timer.unref();
  return () => clearInterval(timer);
}
