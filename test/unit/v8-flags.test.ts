import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { V8_FLAGS } from '../../src/base/v8-flags.js';

/**
 * The service's process runs with base/v8-flags.ts's settings, applied where every surface's server is made
 * (`createServer`). V8 cannot be asked for a flag's value, but `v8.cachedDataVersionTag()` is a hash of its version and
 * flags: a process that applied the flags at run time has the tag of one started with them on the command line. Each
 * case runs a child Node with a preload that prints the tag when it exits; the children use the build (`npm test`
 * builds first), as the CLI tests run bin/svc.js.
 */
const dir = mkdtempSync(join(tmpdir(), 'v8-flags-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const PRINT_TAG =
  "import v8 from 'node:v8'; process.on('exit', () => console.log(`tag=${v8.cachedDataVersionTag()}`));";
const preload = join(dir, 'print-tag.mjs');
writeFileSync(preload, PRINT_TAG);

const tagIn = (out: string): string => {
  const tag = /^tag=(\d+)$/m.exec(out)?.[1];
  if (!tag) throw new Error(`no tag printed:\n${out}`);
  return tag;
};

/** The tag `node ...args` prints at its exit. */
function tagOf(args: string[]): string {
  return tagIn(execFileSync(process.execPath, ['--import', preload, ...args], { encoding: 'utf8' }));
}

const built = (path: string) => JSON.stringify(fileURLToPath(new URL(`../../dist/${path}`, import.meta.url)));
const launcher = fileURLToPath(new URL('../../bin/svc.js', import.meta.url));

/** The tag of the launcher started as `npm start` starts it (embedded database, ephemeral ports), once it is up. */
async function launcherTag(): Promise<string> {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    DATA_DIR: mkdtempSync(join(dir, 'data-')),
    API_PORT: '0',
    AUTH_PORT: '0',
    MCP_PORT: '0',
    AGENCY_MCP_PORT: '0',
    LOG_LEVEL: 'warn',
  };
  delete env['DATABASE_URL'];
  delete env['BASE_URL'];
  const child = spawn(process.execPath, ['--import', preload, launcher, 'start', '--only', 'api,auth'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (c: Buffer) => (out += c.toString()));
  for (let i = 0; i < 400 && !/auth\s+http:\/\/\S+/.test(out) && child.exitCode === null; i++)
    await new Promise((r) => setTimeout(r, 50));
  child.kill('SIGTERM');
  await exited;
  return tagIn(out);
}

describe('V8 flags of the service process', () => {
  const withFlags = tagOf([...V8_FLAGS, '-e', '']);

  it('change the tag, so the cases below can fail', () => {
    expect(tagOf(['-e', ''])).not.toBe(withFlags);
  });

  it('are applied where each surface makes its server, as if given on the command line', () => {
    const source = `
      import pino from 'pino';
      import { createServer } from ${built('http/server.js')};
      import { loadConfig } from ${built('config/config.js')};
      import { NO_METRICS } from ${built('base/metrics.js')};
      createServer(loadConfig({ NODE_ENV: 'test' }), { surface: 'api', logger: pino({ level: 'silent' }), metrics: NO_METRICS });
    `;
    expect(tagOf(['--input-type=module', '-e', source])).toBe(withFlags);
  });

  it('hold in the launcher started as npm start starts it', async () => {
    expect(await launcherTag()).toBe(withFlags);
  }, 30_000);

  it('include no allocation-site pretenuring (docs/performance.md, lever 38)', () => {
    expect(V8_FLAGS).toContain('--no-allocation-site-pretenuring');
  });
});
