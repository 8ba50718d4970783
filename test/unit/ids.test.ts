import { describe, expect, it } from 'vitest';
import { newId, newOrderedId, pooledRandomBytes } from '../../src/base/ids.js';

describe('ids', () => {
  it('newId: a prefix and 22 alphanumeric characters', () => {
    expect(newId('req')).toMatch(/^req_[A-Za-z0-9]{22}$/);
    expect(new Set(Array.from({ length: 1000 }, () => newId('req'))).size).toBe(1000);
  });

  it('pooledRandomBytes: each byte handed out once, in buffers of their own, across refills of the pool', () => {
    // 4,096-byte pool: 300 draws of 33 bytes cross its end several times, never handing the same bytes out twice.
    const draws = Array.from({ length: 300 }, () => pooledRandomBytes(33));
    expect(draws.every((b) => b.length === 33)).toBe(true);
    expect(new Set(draws.map((b) => b.toString('hex'))).size).toBe(300);
    const kept = Buffer.from(draws[0]!);
    pooledRandomBytes(4096);
    expect(draws[0]).toEqual(kept);
    expect(() => pooledRandomBytes(4097)).toThrow(RangeError);
  });

  it('newOrderedId sorts in the order of making, within one millisecond and across them', () => {
    const start = Date.UTC(2026, 10, 23);
    const ids = [
      ...Array.from({ length: 100 }, () => newOrderedId('evt', start + 1)),
      ...Array.from({ length: 100 }, () => newOrderedId('evt', start + 2)),
      ...Array.from({ length: 10 }, () => newOrderedId('evt', start + 1000)),
    ];
    for (const id of ids) expect(id).toMatch(/^evt_[a-z0-9]{12}[A-Za-z0-9]{10}$/);
    expect([...ids].sort()).toEqual(ids);
    // PostgreSQL's usual collations compare digits and lowercase letters as byte order does.
    expect([...ids].sort((a, b) => a.localeCompare(b, 'en-US'))).toEqual(ids);
  });

  it('newOrderedId never goes backwards when the clock stands still or steps back', () => {
    const t = Date.UTC(2026, 10, 24);
    const ids = [newOrderedId('evt', t), newOrderedId('evt', t - 5_000), newOrderedId('evt', t)];
    expect([...ids].sort()).toEqual(ids);
    // Past the sequence's room in one millisecond (36³ ids), the time part runs ahead instead of wrapping.
    const many = Array.from({ length: 36 ** 3 + 10 }, () => newOrderedId('evt', t));
    expect(many.slice(-20).every((id, i, a) => i === 0 || a[i - 1]! < id)).toBe(true);
  });
});
