import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * base/tick-shape.ts keeps V8's record of `process.nextTick`'s entries monomorphic across full garbage collections.
 * The record is V8's feedback, which only V8 can show: each case runs in a child Node with `%DebugPrint` allowed and
 * reads the state of the four property stores of nextTick's literal from what it prints. `--retain-maps-for-n-gc=0`
 * lets one collection drop what V8's memory reducer drops on an idle server, and synchronous optimisation makes the
 * outcome the same on every run (with background compilation it varies between runs, as it does in a server).
 * The child imports the build (`npm test` builds first), as the CLI tests run bin/svc.js.
 */
const TICK_SHAPE = fileURLToPath(new URL('../../dist/base/tick-shape.js', import.meta.url));

/** The states of nextTick's literal stores after hot use, collections, and use again; `keep` calls the module first. */
function literalStoreStates(keep: boolean): string[] {
  const source = `
    import { keepTickObjectShape } from ${JSON.stringify(TICK_SHAPE)};
    if (${keep}) keepTickObjectShape();
    function callback() {}
    function hot(i) { process.nextTick(callback, i); }
    const turn = () => new Promise((resolve) => setImmediate(resolve));
    for (let round = 0; round < 20; round++) { for (let i = 0; i < 2000; i++) hot(i); await turn(); }
    for (let i = 0; i < 4; i++) globalThis.gc();
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < 50; i++) { hot(i); process.nextTick(callback, i); }
      await turn();
    }
    %DebugPrint(process.nextTick);
  `;
  const printed = execFileSync(
    process.execPath,
    [
      '--allow-natives-syntax',
      '--expose-gc',
      '--retain-maps-for-n-gc=0',
      '--no-concurrent-recompilation',
      '--input-type=module',
      '-e',
      source,
    ],
    { encoding: 'utf8' },
  );
  return [...printed.matchAll(/DefineKeyedOwnPropertyInLiteral ([A-Z_]+)/g)].map((m) => m[1]!);
}

describe('the shape of nextTick entries', () => {
  it('stays monomorphic through full collections once an entry is kept', () => {
    expect(literalStoreStates(true)).toEqual(['MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC']);
  });

  it('turns megamorphic without it (what the module guards against, on this Node)', () => {
    const states = literalStoreStates(false);
    expect(states).toHaveLength(4);
    expect(states).toContain('MEGAMORPHIC');
  });
});
