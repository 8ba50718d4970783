import { expect, it } from 'vitest';
import { coalesced, isItemFailure } from '../../src/store/coalesce.js';

/**
 * The grouping rules of store/coalesce.ts, on a statement that only records what it was given (the rotation that uses
 * it is held against PostgreSQL in test/store/refresh-rotation.test.ts).
 */
function recordingStatement(o: { concurrency: number; fail?: (items: readonly string[]) => unknown }) {
  const statements: string[][] = [];
  const pending: (() => void)[] = [];
  let running = 0;
  let mostRunning = 0;
  const settle = () => pending.splice(0).forEach((release) => release());
  const statement = async (items: readonly string[]): Promise<string[]> => {
    statements.push([...items]);
    running++;
    mostRunning = Math.max(mostRunning, running);
    await new Promise<void>((release) => pending.push(release));
    running--;
    const failure = o.fail?.(items);
    if (failure) throw failure;
    return items.map((item) => `done ${item}`);
  };
  const run = coalesced<string, string>({
    concurrency: o.concurrency,
    maxItems: 3,
    key: (item) => item.split('#')[0]!,
    one: async (item) => (await statement([item]))[0]!,
    many: statement,
  });
  return { run, statements, settle, mostRunning: () => mostRunning };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

it('runs alone what comes while a connection is free, and groups what waits, in key order, a few at a time', async () => {
  const s = recordingStatement({ concurrency: 2 });
  const results = ['a', 'b', 'f', 'e', 'd', 'c'].map(s.run);
  await turns(1);
  expect(s.statements).toEqual([['a'], ['b']]);
  s.settle();
  await turns(3);
  expect(s.statements.slice(2)).toEqual([['d', 'e', 'f'], ['c']]);
  expect(s.mostRunning()).toBe(2);
  s.settle();
  expect(await Promise.all(results)).toEqual(['a', 'b', 'f', 'e', 'd', 'c'].map((x) => `done ${x}`));
});

it('never runs two items of one key together: the later waits for the earlier', async () => {
  const s = recordingStatement({ concurrency: 2 });
  const results = ['a#1', 'a#2', 'a#3', 'b'].map(s.run);
  await turns(1);
  expect(s.statements).toEqual([['a#1'], ['b']]);
  for (let i = 0; i < 3; i++) {
    s.settle();
    await turns(3);
  }
  expect(s.statements.slice(2)).toEqual([['a#2'], ['a#3']]);
  expect(await Promise.all(results)).toHaveLength(4);
});

it('runs a group again one item at a time when it fails on one item’s account', async () => {
  const conflict = Object.assign(new Error('duplicate key'), { code: '23505' });
  const s = recordingStatement({
    concurrency: 1,
    fail: (items) => (items.includes('y') ? conflict : undefined),
  });
  const results = ['w', 'x', 'y', 'z'].map((item) => s.run(item).then(String, (e: Error) => e.message));
  for (let i = 0; i < 6; i++) {
    s.settle();
    await turns(3);
  }
  expect(await Promise.all(results)).toEqual(['done w', 'done x', 'duplicate key', 'done z']);
  expect(s.statements).toEqual([['w'], ['x', 'y', 'z'], ['x'], ['y'], ['z']]);
});

it('fails every item of a group, once, when the failure is not one item’s (an outage, a timeout)', async () => {
  const outage = Object.assign(new Error('connection terminated'), { code: '57P01' });
  const s = recordingStatement({ concurrency: 1, fail: (items) => (items.length > 1 ? outage : undefined) });
  const results = ['w', 'x', 'y'].map((item) => s.run(item).then(String, (e: Error) => e.message));
  for (let i = 0; i < 3; i++) {
    s.settle();
    await turns(3);
  }
  expect(await Promise.all(results)).toEqual(['done w', 'connection terminated', 'connection terminated']);
  expect(s.statements).toEqual([['w'], ['x', 'y']]);
});

it('tells an item’s failure (SQLSTATE classes 23 and 40) from the others', () => {
  expect(isItemFailure({ code: '23505' })).toBe(true);
  expect(isItemFailure({ code: '40P01' })).toBe(true);
  expect(isItemFailure({ code: '40001' })).toBe(true);
  expect(isItemFailure({ code: '57014' })).toBe(false);
  expect(isItemFailure({ code: 'ECONNREFUSED' })).toBe(false);
  expect(isItemFailure(new Error('no code'))).toBe(false);
  expect(isItemFailure(null)).toBe(false);
});
