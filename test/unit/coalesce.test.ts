import { expect, it } from 'vitest';
import { coalesced, StatementWaitTimeout } from '../../src/store/coalesce.js';
import { isDependencyOutage } from '../../src/http/dependency-outage.js';
import { isRefusedStatement } from '../../src/store/pg-errors.js';

/**
 * The grouping rules of store/coalesce.ts, on a statement that only records what it was given (the rotation that uses
 * it is held against PostgreSQL in test/store/refresh-rotation.test.ts).
 */
function recordingStatement(o: {
  concurrency: number;
  fail?: (items: readonly string[]) => unknown;
  waitTimeoutMs?: number;
}) {
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
    waitTimeoutMs: o.waitTimeoutMs ?? 0,
    key: (item) => item.split('#')[0]!,
    one: async (item) => (await statement([item]))[0]!,
    many: statement,
  });
  return { run, statements, settle, mostRunning: () => mostRunning };
}

const turns = async (n: number) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

it('sends a turn’s calls together at its end, and groups what waits, in key order, a few at a time', async () => {
  const s = recordingStatement({ concurrency: 2 });
  const alone = s.run('a');
  // Nothing is sent before the turn ends: the calls still to come in it join the statement.
  expect(s.statements).toEqual([]);
  await turns(1);
  expect(s.statements).toEqual([['a']]);
  // One turn's calls on the connection left free: the first three (maxItems) together, in key order.
  const results = ['b', 'f', 'e', 'd', 'c'].map(s.run);
  await turns(1);
  expect(s.statements).toEqual([['a'], ['b', 'e', 'f']]);
  // Both connections busy: the rest waits, and the next statement takes it together.
  s.settle();
  await turns(3);
  expect(s.statements.slice(2)).toEqual([['c', 'd']]);
  expect(s.mostRunning()).toBe(2);
  s.settle();
  expect(await Promise.all([alone, ...results])).toEqual(
    ['a', 'b', 'f', 'e', 'd', 'c'].map((x) => `done ${x}`),
  );
});

it('never runs two items of one key together: the later waits for the earlier', async () => {
  const s = recordingStatement({ concurrency: 2 });
  const results = ['a#1', 'a#2', 'a#3', 'b'].map(s.run);
  await turns(1);
  // The second connection is free, yet neither 'a#2' nor 'a#3' goes while 'a#1' is in flight.
  expect(s.statements).toEqual([['a#1', 'b']]);
  for (let i = 0; i < 3; i++) {
    s.settle();
    await turns(3);
  }
  expect(s.statements.slice(1)).toEqual([['a#2'], ['a#3']]);
  expect(await Promise.all(results)).toHaveLength(4);
});

it('runs a group again one item at a time when it fails on one item’s account', async () => {
  const conflict = Object.assign(new Error('duplicate key'), { code: '23505', severity: 'ERROR' });
  const s = recordingStatement({
    concurrency: 1,
    fail: (items) => (items.includes('y') ? conflict : undefined),
  });
  const run = (item: string) => s.run(item).then(String, (e: Error) => e.message);
  const results = [run('w')];
  await turns(1);
  results.push(...['x', 'y', 'z'].map(run));
  for (let i = 0; i < 6; i++) {
    s.settle();
    await turns(3);
  }
  expect(await Promise.all(results)).toEqual(['done w', 'done x', 'duplicate key', 'done z']);
  expect(s.statements).toEqual([['w'], ['x', 'y', 'z'], ['x'], ['y'], ['z']]);
});

it('fails every item of a group, once, when the failure is not one item’s (an outage, a timeout)', async () => {
  const outage = Object.assign(new Error('terminating connection'), { code: '57P01', severity: 'FATAL' });
  const s = recordingStatement({ concurrency: 1, fail: (items) => (items.length > 1 ? outage : undefined) });
  const run = (item: string) => s.run(item).then(String, (e: Error) => e.message);
  const results = [run('w')];
  await turns(1);
  results.push(...['x', 'y'].map(run));
  for (let i = 0; i < 3; i++) {
    s.settle();
    await turns(3);
  }
  expect(await Promise.all(results)).toEqual(['done w', 'terminating connection', 'terminating connection']);
  expect(s.statements).toEqual([['w'], ['x', 'y']]);
});

it('tells a refusal of what the statement was given from a failure of the database or the connection', () => {
  const reported = (code: string) => ({ code, severity: 'ERROR' });
  for (const code of ['23505', '22021', '40P01', '40001', '55P03', '42601'])
    expect(isRefusedStatement(reported(code))).toBe(true);
  // A read-only server (after a failover) and a full disk refuse every item alike: nothing to run again one by one.
  for (const code of ['08006', '25006', '53100', '53300', '57014', '57P01', '58030', 'XX000'])
    expect(isRefusedStatement(reported(code))).toBe(false);
  // Errors of the connection itself carry no severity: the statement may have run.
  expect(isRefusedStatement({ code: '23505' })).toBe(false);
  expect(isRefusedStatement({ code: 'EPIPE' })).toBe(false);
  expect(isRefusedStatement(new Error('Query read timeout'))).toBe(false);
  expect(isRefusedStatement(null)).toBe(false);
});

it('fails every item, once, when a shared statement answers for fewer items than it was given', async () => {
  const calls: string[][] = [];
  const run = coalesced<string, string>({
    concurrency: 1,
    maxItems: 8,
    waitTimeoutMs: 0,
    key: (item) => item,
    one: async (item) => (calls.push([item]), item),
    many: async (items) => (calls.push([...items]), items.slice(1)),
  });
  const results = [run('a').then(String)];
  await turns(1);
  results.push(...['b', 'c'].map((item) => run(item).then(String, (e: Error) => e.message)));
  expect(await Promise.all(results)).toEqual([
    'a',
    expect.stringMatching(/answered 1 of 2/),
    expect.stringMatching(/answered 1 of 2/),
  ]);
  expect(calls).toEqual([['a'], ['b', 'c']]);
});

it('settles a call whose statement throws before it starts', async () => {
  const run = coalesced<string, string>({
    concurrency: 1,
    maxItems: 8,
    waitTimeoutMs: 0,
    key: (item) => item,
    one: (item) => {
      if (item === 'bad') throw new Error('thrown at once');
      return Promise.resolve(item);
    },
    many: (items) => Promise.resolve([...items]),
  });
  await expect(run('bad')).rejects.toThrow('thrown at once');
  await expect(run('good')).resolves.toBe('good');
});

it('fails a call that waited past its deadline for a statement, and never runs it', async () => {
  const s = recordingStatement({ concurrency: 1, waitTimeoutMs: 40 });
  const stuck = s.run('a');
  await turns(1);
  const waited = ['b', 'a#2'].map((item) => s.run(item).then(String, (e: unknown) => e));
  await turns(1);
  expect(s.statements).toEqual([['a']]);
  // 'a' never finishes within the deadline: neither 'b' (behind the one place in flight) nor 'a#2' (behind 'a').
  const [b, a2] = await Promise.all(waited);
  for (const e of [b, a2]) {
    expect(e).toBeInstanceOf(StatementWaitTimeout);
    expect(isDependencyOutage(e)).toBe(true);
  }
  s.settle();
  expect(await stuck).toBe('done a');
  // What comes later runs as before; what timed out was never given to a statement.
  const later = s.run('c');
  await turns(1);
  s.settle();
  expect(await later).toBe('done c');
  expect(s.statements).toEqual([['a'], ['c']]);
});

it('keeps a call that waits less than its deadline', async () => {
  const s = recordingStatement({ concurrency: 1, waitTimeoutMs: 60_000 });
  const results = ['a', 'b', 'c'].map(s.run);
  for (let i = 0; i < 2; i++) {
    await turns(2);
    s.settle();
  }
  expect(await Promise.all(results)).toEqual(['done a', 'done b', 'done c']);
});
