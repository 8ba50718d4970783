import { describe, expect, it } from 'vitest';
import { isDependencyOutage } from '../../src/http/dependency-outage.js';
import { isBusy, whileBusy } from '../../src/store/busy.js';

/** An error as better-sqlite3 throws it: SQLite's (extended) result code in `code`. */
const sqliteError = (code: string) => Object.assign(new Error('database is locked'), { code });

/** An attempt that is busy `times` times, then returns `value`; counts its calls. */
function busyFor<T>(times: number, value: T) {
  let calls = 0;
  const attempt = () => {
    calls++;
    if (calls <= times) throw sqliteError('SQLITE_BUSY');
    return value;
  };
  return { attempt, calls: () => calls };
}

describe('whileBusy (store/busy.ts)', () => {
  it('answers synchronously when the first try runs: no promise on the path without contention', () => {
    const { attempt, calls } = busyFor(0, 42);
    expect(whileBusy(attempt, 1000)).toBe(42);
    expect(calls()).toBe(1);
  });

  it('tries again after pauses, the waiting done by the pause it is given', async () => {
    const { attempt, calls } = busyFor(3, 'done');
    const pauses: number[] = [];
    const result = whileBusy(attempt, 1000, async (ms) => {
      pauses.push(ms);
    });
    expect(result).toBeInstanceOf(Promise);
    expect(await result).toBe('done');
    expect(calls()).toBe(4);
    expect(pauses).toEqual([1, 2, 5]);
  });

  it('hands back what a try returns, a promise as it is: busy is said by throwing, as better-sqlite3 does', async () => {
    const rejected = Promise.reject(sqliteError('SQLITE_BUSY'));
    rejected.catch(() => {});
    let calls = 0;
    expect(
      whileBusy(() => {
        calls++;
        return rejected;
      }, 1000),
    ).toBe(rejected);
    expect(calls).toBe(1);
  });

  it('gives up with the last SQLITE_BUSY once the wait has run out', async () => {
    const { attempt, calls } = busyFor(Number.POSITIVE_INFINITY, 'never');
    await expect(whileBusy(attempt, 30)).rejects.toMatchObject({ code: 'SQLITE_BUSY' });
    expect(calls()).toBeGreaterThan(1);
  });

  it('does not try again after any other error, nor with no wait allowed', () => {
    let calls = 0;
    const full = () => {
      calls++;
      throw sqliteError('SQLITE_FULL');
    };
    expect(() => whileBusy(full, 1000)).toThrow(expect.objectContaining({ code: 'SQLITE_FULL' }));
    expect(calls).toBe(1);
    expect(() => whileBusy(busyFor(1, 'x').attempt, 0)).toThrow(
      expect.objectContaining({ code: 'SQLITE_BUSY' }),
    );
  });

  it("SQLite's extended busy codes are busy, and an outage answered 503", () => {
    for (const code of [
      'SQLITE_BUSY',
      'SQLITE_BUSY_SNAPSHOT',
      'SQLITE_BUSY_RECOVERY',
      'SQLITE_BUSY_TIMEOUT',
    ]) {
      expect(isBusy(sqliteError(code))).toBe(true);
      expect(isDependencyOutage(sqliteError(code))).toBe(true);
    }
    expect(isBusy(sqliteError('SQLITE_LOCKED'))).toBe(false);
    expect(isBusy(undefined)).toBe(false);
  });
});
