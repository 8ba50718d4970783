import { performance } from 'node:perf_hooks';

/**
 * The sources of time, injected everywhere so that tests can move it (codes, expiry, cache bounds).
 *
 * Two clocks, because the wall clock can be set: NTP stepping it at boot, a virtual machine restored from a snapshot,
 * an operator's `date -s`. `now` is the wall clock, for what is stored, signed or compared with another instance (a
 * token's `exp`, a row's `expires_at`). `monotonic` only moves forward, for "how long ago" in this process (how long a
 * cached answer is trusted, when the keys were last read, when the last prune ran): measured on the wall clock, a step
 * back of an hour kept every cached liveness answer for that hour, so a revocation made on another instance went
 * unseen here for an hour instead of LIVENESS_CACHE_SECONDS.
 */
export interface Clock {
  /** Epoch milliseconds (the wall clock). */
  now(): number;
  /** Milliseconds from an arbitrary origin, never set back: only differences between two readings mean anything. */
  monotonic(): number;
}

/**
 * A gate that lets through at most once every `intervalMs` of monotonic time: the first call returns true, later ones
 * true again only once the interval has passed since the last that did. For work or warnings a burst must not repeat.
 */
export function atMostEvery(intervalMs: number, clock: Clock): () => boolean {
  let last = Number.NEGATIVE_INFINITY;
  return () => {
    const now = clock.monotonic();
    if (now - last < intervalMs) return false;
    last = now;
    return true;
  };
}

export const systemClock: Clock = { now: () => Date.now(), monotonic: () => performance.now() };

/** A clock that tests move by hand. */
export class ManualClock implements Clock {
  private elapsed = 0;
  constructor(private current = Date.now()) {}
  now(): number {
    return this.current;
  }
  monotonic(): number {
    return this.elapsed;
  }
  /** Time passes: both clocks move. */
  advance(ms: number): void {
    this.current += ms;
    this.elapsed += ms;
  }
  /** The wall clock is set (back, with a negative `ms`) and no time passes: the monotonic clock stays. */
  step(ms: number): void {
    this.current += ms;
  }
}

const DAY_MS = 86_400_000;
/** The first instant of the year 10000: past it `toISOString` writes six-digit years (ECMA-262 §21.4.1.32). */
const YEAR_10000_MS = 253_402_300_800_000;
/** How many days' `YYYY-MM-DDT` a process keeps: timestamps cluster on few days, and the memo is cleared when full. */
const REMEMBERED_DAYS = 1024;
const dayPrefixes = new Map<number, string>();
const pad2 = (n: number): string => (n < 10 ? `0${n}` : `${n}`);

/**
 * RFC 3339 in UTC with milliseconds, exactly as `Date#toISOString` writes it. Every answer carries timestamps (a list
 * of clients four), and `toISOString` cost ~450 ns each: the date part is taken from it once per day and remembered,
 * the time of day is plain arithmetic (~70 ns). For a fraction of a millisecond, or outside the years 1970–9999, it is
 * `toISOString` itself.
 */
export function toRfc3339(ms: number): string {
  if (!Number.isInteger(ms) || ms < 0 || ms >= YEAR_10000_MS) return new Date(ms).toISOString();
  const day = Math.floor(ms / DAY_MS);
  let prefix = dayPrefixes.get(day);
  if (prefix === undefined) {
    if (dayPrefixes.size >= REMEMBERED_DAYS) dayPrefixes.clear();
    prefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    dayPrefixes.set(day, prefix);
  }
  let rest = ms - day * DAY_MS;
  const hours = Math.floor(rest / 3_600_000);
  rest -= hours * 3_600_000;
  const minutes = Math.floor(rest / 60_000);
  rest -= minutes * 60_000;
  const seconds = Math.floor(rest / 1000);
  const millis = rest - seconds * 1000;
  const millisText = millis < 10 ? `00${millis}` : millis < 100 ? `0${millis}` : `${millis}`;
  return `${prefix}${pad2(hours)}:${pad2(minutes)}:${pad2(seconds)}.${millisText}Z`;
}
export const toEpochSeconds = (ms: number): number => Math.floor(ms / 1000);
