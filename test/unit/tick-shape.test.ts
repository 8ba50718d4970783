import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * base/tick-shape.ts keeps V8's record of `process.nextTick`'s entries monomorphic across full garbage collections.
 * The record is V8's feedback, which only V8 can show: each case runs in a child Node with `%DebugPrint` allowed and
 * reads the state of the four property stores of nextTick's literal from what it prints. `--retain-maps-for-n-gc=0`
 * lets one collection drop what V8's memory reducer drops on an idle server, and synchronous optimisation makes the
 * outcome the same on every run (with background compilation it varies between runs, as it does in a server).
 * The process that keeps the shape does it the way the service does: by making a surface's server (`createServer`),
 * so the test fails whether the module or its call there is lost. The child imports the build (`npm test` builds
 * first), as the CLI tests run bin/svc.js.
 */
const built = (path: string) => JSON.stringify(fileURLToPath(new URL(`../../dist/${path}`, import.meta.url)));

/** The states of nextTick's literal stores after hot use, collections, and use again; `server` makes one first. */
function literalStoreStates(server: boolean): string[] {
  const source = `
    import pino from 'pino';
    import { createServer } from ${built('http/server.js')};
    import { loadConfig } from ${built('config/config.js')};
    import { NO_METRICS } from ${built('base/metrics.js')};
    if (${server}) {
      createServer(loadConfig({ NODE_ENV: 'test' }), { surface: 'api', logger: pino({ level: 'silent' }), metrics: NO_METRICS });
    }
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
  // V8 prints with C's stdio, which loses what it buffered once Node has made a pipe on fd 1 non-blocking (the
  // logger writes there): a file keeps every byte.
  const out = join(mkdtempSync(join(tmpdir(), 'tick-shape-')), 'printed.txt');
  const fd = openSync(out, 'w');
  execFileSync(
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
    { stdio: ['ignore', fd, 'inherit'] },
  );
  closeSync(fd);
  const printed = readFileSync(out, 'utf8');
  rmSync(dirname(out), { recursive: true, force: true });
  return [...printed.matchAll(/DefineKeyedOwnPropertyInLiteral ([A-Z_]+)/g)].map((m) => m[1]!);
}

describe('the shape of nextTick entries', () => {
  it('stays monomorphic through full collections in a process that made a server', () => {
    expect(literalStoreStates(true)).toEqual(['MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC', 'MONOMORPHIC']);
  });

  it('turns megamorphic without it (what the module guards against, on this Node)', () => {
    const states = literalStoreStates(false);
    expect(states).toHaveLength(4);
    expect(states).toContain('MEGAMORPHIC');
  });
});
