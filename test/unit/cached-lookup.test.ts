import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/base/clock.js';
import { CachedLookup } from '../../src/store/cached-lookup.js';

/** The cache in front of the per-request reads (liveness, users, pins): one read per miss, and `forget` wins. */

function deferred<T>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

function lookup() {
  const reads: ReturnType<typeof deferred<string>>[] = [];
  const clock = new ManualClock(0);
  const cache = new CachedLookup<string>({
    clock,
    ttlMs: 5000,
    capacity: 10,
    load: () => {
      const d = deferred<string>();
      reads.push(d);
      return d.promise;
    },
  });
  return { cache, reads, advance: (ms: number) => clock.advance(ms), clock };
}

describe('CachedLookup', () => {
  it('concurrent misses share one read, and the answer is kept for the TTL', async () => {
    const { cache, reads, advance } = lookup();
    const [a, b] = [cache.get('x'), cache.get('x')];
    expect(reads).toHaveLength(1);
    reads[0]!.resolve('live');
    expect(await Promise.all([a, b])).toEqual(['live', 'live']);
    advance(4999);
    expect(await cache.get('x')).toBe('live');
    expect(reads).toHaveLength(1);
    advance(1);
    void cache.get('x');
    expect(reads).toHaveLength(2);
  });

  it('the TTL is a duration: a wall clock set back does not stretch it, nor one set forward cut it', async () => {
    const { cache, reads, advance, clock } = lookup();
    const first = cache.get('x');
    reads[0]!.resolve('live');
    await first;
    clock.step(-3_600_000);
    advance(5000);
    void cache.get('x');
    expect(reads).toHaveLength(2);
    reads[1]!.resolve('live');
    await cache.get('x');
    clock.step(3_600_000);
    expect(await cache.get('x')).toBe('live');
    expect(reads).toHaveLength(2);
  });

  it('a forget while a read is under way: that answer is not kept, the next lookup reads again', async () => {
    const { cache, reads } = lookup();
    const before = cache.get('x');
    cache.forget('x'); // e.g. this process revoked the session while a request was checking it
    const after = cache.get('x');
    expect(reads).toHaveLength(2);
    reads[0]!.resolve('live');
    reads[1]!.resolve('revoked');
    expect(await before).toBe('live');
    expect(await after).toBe('revoked');
    expect(await cache.get('x')).toBe('revoked');
    expect(reads).toHaveLength(2);
  });

  it('a forget racing the read it came after is not undone by that read', async () => {
    const { cache, reads } = lookup();
    const stale = cache.get('x');
    cache.forget('x');
    reads[0]!.resolve('live');
    await stale;
    void cache.get('x');
    expect(reads).toHaveLength(2);
  });

  it('a failed read is not kept', async () => {
    const { cache, reads } = lookup();
    const failing = cache.get('x');
    reads[0]!.resolve(Promise.reject(new Error('down')) as unknown as string);
    await expect(failing).rejects.toThrow('down');
    void cache.get('x');
    expect(reads).toHaveLength(2);
  });
});
