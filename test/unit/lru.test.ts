import { describe, expect, it } from 'vitest';
import { Lru } from '../../src/base/lru.js';

describe('Lru', () => {
  it('never holds more than its capacity and evicts the oldest first', () => {
    const lru = new Lru<number, string>(4);
    for (let i = 0; i < 10; i++) lru.set(i, `v${i}`);
    expect(lru.size).toBe(4);
    expect([0, 1, 2, 3, 4, 5].map((i) => lru.get(i))).toEqual([
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
      undefined,
    ]);
    expect([6, 7, 8, 9].map((i) => lru.get(i))).toEqual(['v6', 'v7', 'v8', 'v9']);
  });

  it('keeps an entry that is read often, however many others pass through', () => {
    const lru = new Lru<string, number>(8);
    lru.set('hot', 1);
    for (let i = 0; i < 1000; i++) {
      lru.set(`cold${i}`, i);
      expect(lru.get('hot')).toBe(1);
    }
  });

  it('stores nothing with capacity 0, and deletes', () => {
    const none = new Lru<string, number>(0);
    none.set('a', 1);
    expect(none.get('a')).toBeUndefined();
    const lru = new Lru<string, number>(2);
    lru.set('a', 1);
    lru.delete('a');
    expect(lru.get('a')).toBeUndefined();
  });
});
