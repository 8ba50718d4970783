import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { V8_FLAGS } from '../../src/base/v8-flags.js';

/**
 * The service's process runs with base/v8-flags.ts's settings. V8 cannot be asked for a flag's value, but
 * `v8.cachedDataVersionTag()` is a hash of its version and flags: a process that applied the flags at run time has the
 * tag of one started with them on the command line. The launcher is checked as it is started (bin/svc.js, on the
 * build: `npm test` builds first), with a preload that prints the tag when the process exits.
 */
const dir = mkdtempSync(join(tmpdir(), 'v8-flags-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PRINT_TAG =
  "import v8 from 'node:v8'; process.on('exit', () => console.log(`tag=${v8.cachedDataVersionTag()}`));";
const preload = join(dir, 'print-tag.mjs');
writeFileSync(preload, PRINT_TAG);

/** The tag `node ...args` prints at its exit. */
function tagOf(args: string[]): string {
  const out = execFileSync(process.execPath, ['--import', preload, ...args], { encoding: 'utf8' });
  const tag = /^tag=(\d+)$/m.exec(out)?.[1];
  if (!tag) throw new Error(`no tag printed:\n${out}`);
  return tag;
}

const launcher = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));

describe('V8 flags of the service process', () => {
  it('are applied by the launcher, as if given on the command line', () => {
    const withFlags = tagOf([...V8_FLAGS, '-e', '']);
    expect(tagOf(['-e', ''])).not.toBe(withFlags); // the flags change the tag, so the next line can fail
    expect(tagOf([launcher, '--help'])).toBe(withFlags);
  });

  it('include no allocation-site pretenuring (docs/performance.md, lever 38)', () => {
    expect(V8_FLAGS).toContain('--no-allocation-site-pretenuring');
  });
});
