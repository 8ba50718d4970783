import type { Clock } from '../base/clock.js';
import { Lru } from '../base/lru.js';
import type { CacheCounter } from '../base/metrics.js';

export interface CachedLookupOptions<T> {
  clock: Clock;
  /** How long a looked-up value is trusted; the bound, stated in the README, on seeing another instance's writes. */
  ttlMs: number;
  capacity: number;
  load: (id: string) => Promise<T>;
  /** Values that can never change again (a revoked session stays revoked) are kept until evicted, not re-read. */
  isFinal?: (value: T) => boolean;
  /** Told whether each lookup was answered from the cache (the metrics' hits and misses). */
  counter?: CacheCounter;
}

/**
 * A bounded cache in front of a database read that runs on every request. Concurrent misses for one id share one
 * read; a write made in this process calls `forget`, so this process never serves its own stale data — also when the
 * write lands while a read is under way: that read's answer is not kept (it may predate the write), and the next
 * lookup reads again.
 */
export class CachedLookup<T> {
  /** `loadedAt`: the monotonic clock when its read began. */
  private readonly entries: Lru<string, { value: T; loadedAt: number }>;
  private readonly inFlight = new Map<string, Promise<T>>();

  constructor(private readonly o: CachedLookupOptions<T>) {
    this.entries = new Lru(o.capacity);
  }

  async get(id: string): Promise<T> {
    const now = this.o.clock.monotonic();
    const entry = this.entries.get(id);
    const hit = entry !== undefined && this.fresh(entry, now);
    this.o.counter?.lookup(hit);
    if (hit) return entry.value;
    return this.inFlight.get(id) ?? this.load(id, now);
  }

  /**
   * The value when the cache holds a fresh one, else undefined; never loads and counts nothing, so that a fast path
   * can probe and then either count its hit (`countHit`) or leave the whole request to `get`.
   */
  peek(id: string): T | undefined {
    const entry = this.entries.get(id);
    return entry !== undefined && this.fresh(entry, this.o.clock.monotonic()) ? entry.value : undefined;
  }

  /**
   * Trusted without a read: loaded within the TTL, or a value that can never change back (`isFinal`). The TTL is
   * measured on the monotonic clock: a wall clock set back must not stretch the bound (base/clock.ts).
   */
  private fresh(entry: { loadedAt: number; value: T }, now: number): boolean {
    return now - entry.loadedAt < this.o.ttlMs || this.o.isFinal?.(entry.value) === true;
  }

  /** Counts one lookup answered from the cache, for a hit found with `peek`. */
  countHit(): void {
    this.o.counter?.lookup(true);
  }

  private load(id: string, startedAt: number): Promise<T> {
    const settle = (keep: () => void) => {
      // Still the read of record: no `forget` came while it ran.
      if (this.inFlight.get(id) !== loading) return;
      this.inFlight.delete(id);
      keep();
    };
    const loading: Promise<T> = this.o.load(id).then(
      (value) => {
        settle(() => this.entries.set(id, { value, loadedAt: startedAt }));
        return value;
      },
      (error: unknown) => {
        settle(() => {});
        throw error;
      },
    );
    this.inFlight.set(id, loading);
    return loading;
  }

  forget(id: string): void {
    this.entries.delete(id);
    this.inFlight.delete(id);
  }
}
