import { describe, expect, it } from 'vitest';
import { atMostEvery, ManualClock, toRfc3339 } from '../../src/base/clock.js';

const iso = (ms: number) => new Date(ms).toISOString();

describe('toRfc3339', () => {
  it('writes what Date#toISOString writes, at the edges of days, months, leap years and the range', () => {
    const edges = [
      0,
      1,
      999,
      86_399_999,
      86_400_000,
      Date.UTC(2024, 1, 29, 23, 59, 59, 999),
      Date.UTC(2024, 2, 1),
      Date.UTC(2000, 1, 29, 12, 0, 0, 5),
      Date.UTC(2100, 1, 28, 23, 59, 59, 99),
      Date.UTC(2026, 10, 24, 10, 14, 31, 7),
      Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    ];
    for (const ms of edges) expect(toRfc3339(ms)).toBe(iso(ms));
  });

  it('agrees with Date#toISOString on 100,000 random instants of years 1970–9999, each asked twice', () => {
    const disagreements: string[] = [];
    for (let i = 0; i < 100_000; i++) {
      const ms = Math.floor(Math.random() * 253_402_300_800_000);
      for (const written of [toRfc3339(ms), toRfc3339(ms)])
        if (written !== iso(ms)) disagreements.push(`${ms}: ${written}`);
    }
    expect(disagreements).toEqual([]);
  });

  it('leaves fractions of a millisecond and instants outside those years to Date#toISOString, a RangeError included', () => {
    for (const ms of [-1, -86_400_001, Date.UTC(10000, 0, 1), Date.UTC(-5, 3, 2), 1.5, 1_795_515_544_841.9])
      expect(toRfc3339(ms)).toBe(iso(ms));
    expect(() => toRfc3339(Number.NaN)).toThrow(RangeError);
  });
});

describe('atMostEvery', () => {
  it('lets the first call through, then one per interval of monotonic time, whatever the wall clock does', () => {
    const clock = new ManualClock();
    const due = atMostEvery(1000, clock);
    expect(due()).toBe(true);
    expect(due()).toBe(false);
    clock.step(-3_600_000);
    clock.advance(999);
    expect(due()).toBe(false);
    clock.advance(1);
    expect(due()).toBe(true);
    clock.step(3_600_000);
    expect(due()).toBe(false);
  });
});
