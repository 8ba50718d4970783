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
 * read; a write made in this process calls `forget`, so this process never serves its own stale data.
 */
export class CachedLookup<T> {
  private readonly entries: Lru<string, { value: T; loadedAt: number }>;
  private readonly inFlight = new Map<string, Promise<T>>();

  constructor(private readonly o: CachedLookupOptions<T>) {
    this.entries = new Lru(o.capacity);
  }

  async get(id: string): Promise<T> {
    const now = this.o.clock.now();
    const entry = this.entries.get(id);
    const hit =
      entry !== undefined && (now - entry.loadedAt < this.o.ttlMs || this.o.isFinal?.(entry.value) === true);
    this.o.counter?.lookup(hit);
    if (hit) return entry.value;
    let pending = this.inFlight.get(id);
    if (!pending) {
      pending = this.o.load(id).finally(() => this.inFlight.delete(id));
      this.inFlight.set(id, pending);
    }
    const value = await pending;
    this.entries.set(id, { value, loadedAt: now });
    return value;
  }

  forget(id: string): void {
    this.entries.delete(id);
  }
}
