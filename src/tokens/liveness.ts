import type { Clock } from '../domain/clock.js';
import { Lru } from './lru.js';

/**
 * Caches "is this session / connection still live?" for a short time, so that a token check does not read the
 * database on every request. A revocation made in this process is seen at once (`forget`); one made by another
 * instance is seen within `ttlMs` — the bound the README states. "Not live" is final and cached until evicted.
 */
export class LivenessCache {
  private readonly entries: Lru<string, { live: boolean; checkedAt: number }>;
  private readonly inFlight = new Map<string, Promise<boolean>>();

  constructor(
    private readonly clock: Clock,
    private readonly ttlMs: number,
    capacity: number,
    private readonly check: (id: string) => Promise<boolean>,
  ) {
    this.entries = new Lru(capacity);
  }

  async isLive(id: string): Promise<boolean> {
    const now = this.clock.now();
    const entry = this.entries.get(id);
    if (entry && (!entry.live || now - entry.checkedAt < this.ttlMs)) return entry.live;
    let pending = this.inFlight.get(id);
    if (!pending) {
      pending = this.check(id).finally(() => this.inFlight.delete(id));
      this.inFlight.set(id, pending);
    }
    const live = await pending;
    this.entries.set(id, { live, checkedAt: now });
    return live;
  }

  /** Drops what is known of `id`, so the next check reads the database (call after revoking it here). */
  forget(id: string): void {
    this.entries.delete(id);
  }
}
