import type { Clock } from '../base/clock.js';
import type { CacheCounter } from '../base/metrics.js';
import { CachedLookup } from '../store/cached-lookup.js';

/**
 * "Is this session / connection still live?", cached so that a token check does not read the database on every
 * request. A revocation made in this process is seen at once (`forget`); one made by another instance is seen within
 * `ttlMs` — the bound the README states. "Not live" is final and kept until evicted.
 */
export class LivenessCache {
  private readonly lookup: CachedLookup<boolean>;

  constructor(
    clock: Clock,
    ttlMs: number,
    capacity: number,
    check: (id: string) => Promise<boolean>,
    counter?: CacheCounter,
  ) {
    this.lookup = new CachedLookup({
      clock,
      ttlMs,
      capacity,
      load: check,
      isFinal: (live) => !live,
      counter,
    });
  }

  isLive(id: string): Promise<boolean> {
    return this.lookup.get(id);
  }

  /** True when the cache knows `id` is live right now; counts nothing (see CachedLookup.peek). */
  isKnownLive(id: string): boolean {
    return this.lookup.peek(id) === true;
  }

  /** Counts one check answered from the cache, for a hit found with `isKnownLive`. */
  countHit(): void {
    this.lookup.countHit();
  }

  /** Drops what is known of `id`, so the next check reads the database (call after revoking it here). */
  forget(id: string): void {
    this.lookup.forget(id);
  }
}
