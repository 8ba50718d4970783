import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The official MCP conformance runner's server scenarios, at the 2026-07-28 and 2025-11-25 requirement sets, against
 * one MCP endpoint of ours (shared by test/mcp/conformance.test.ts and test/agency-mcp/conformance.test.ts). The
 * runner needs Node 22, fetched as a registry package (`npx -p node@22`); only when that cannot be installed is the
 * suite skipped, and the reason printed.
 */
export const CONFORMANCE_PACKAGE = '@modelcontextprotocol/conformance@0.2.0-alpha.12';
export const CONFORMANCE_REQUIREMENTS = ['2026-07-28', '2025-11-25'] as const;
const NPX = ['-y', '-p', 'node@22', '-p', CONFORMANCE_PACKAGE, '--'];

export interface ConformanceSuite {
  /** The describe block's title. */
  title: string;
  /** The `--expected-failures` file of a requirement set: fixture-dependent scenarios, each with a one-line reason. */
  baselineFile: (requirements: string) => string;
  /**
   * What a failing check inside a baselined scenario must point at (the runner's fixture surface, or a documented
   * design choice). Anything else is a defect of ours.
   */
  explained: RegExp;
  /** Starts the servers and returns the URL the runner tests (a bearer-adding proxy in front of the endpoint). */
  start: () => Promise<{ url: string; close(): Promise<void> }>;
}

/** Declares the suite: one test per requirement set; without Node 22 (fetched by npx) it fails, never skips. */
export function describeConformance(suite: ConformanceSuite): void {
  describe(suite.title, () => {
    let target: { url: string; close(): Promise<void> } | undefined;
    beforeAll(async () => {
      const node22 = probeNode22();
      if (!node22.ok) throw new Error(`the conformance runner needs Node 22 (npx -p node@22): ${node22.why}`);
      target = await suite.start();
    });
    afterAll(async () => {
      await target?.close();
    });

    for (const requirements of CONFORMANCE_REQUIREMENTS) {
      it(`passes every scenario of --requirements ${requirements} that needs no fixture`, async () => {
        const out = mkdtempSync(join(tmpdir(), 'conformance-'));
        try {
          const file = suite.baselineFile(requirements);
          const run = await runConformance(target!.url, requirements, file, out);
          expect(run.code, run.output.slice(-4000)).toBe(0);
          expect(unexplainedFailures(out, baselined(file), suite.explained)).toEqual([]);
        } finally {
          rmSync(out, { recursive: true, force: true });
        }
      }, 240_000);
    }
  });
}

/** The scenario names of a baseline file (`  - name # reason` lines), longest first so no prefix shadows a name. */
export function baselined(file: string): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .map((line) => /^\s+- ([\w-]+)/.exec(line)?.[1])
    .filter((name): name is string => name !== undefined)
    .sort((a, b) => b.length - a.length);
}

let probed: { ok: boolean; why?: string } | undefined;

export function probeNode22(): { ok: boolean; why?: string } {
  if (probed) return probed;
  const r = spawnSync('npx', ['-y', '-p', 'node@22', '--', 'node', '--version'], {
    encoding: 'utf8',
    timeout: 180_000,
  });
  probed =
    r.status === 0 && r.stdout.trim().startsWith('v22.')
      ? { ok: true }
      : { ok: false, why: (r.error?.message ?? r.stderr ?? '').trim().split('\n').slice(-3).join(' ') };
  return probed;
}

export function runConformance(url: string, requirements: string, baselineFile: string, outDir: string) {
  const args = [
    ...NPX,
    'conformance',
    'server',
    '--url',
    url,
    '--requirements',
    requirements,
    '--expected-failures',
    baselineFile,
    '-o',
    outDir,
  ];
  return new Promise<{ code: number | null; output: string }>((resolve) => {
    const child = spawn('npx', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c) => (output += c));
    child.stderr.on('data', (c) => (output += c));
    child.on('close', (code) => resolve({ code, output }));
  });
}

/** Failed or warned checks whose message `explained` does not match: each one is a real defect. */
export function unexplainedFailures(outDir: string, baseline: string[], explained: RegExp): string[] {
  const bad: string[] = [];
  for (const dir of readdirSync(outDir)) {
    const scenario = baseline.find((name) => dir.startsWith(`server-${name}-20`));
    if (!scenario) continue; // scored scenarios are judged by the runner's exit code; unscored ones not at all
    let checks: { id: string; status: string; errorMessage?: string; details?: unknown }[];
    try {
      checks = JSON.parse(readFileSync(join(outDir, dir, 'checks.json'), 'utf8'));
    } catch {
      continue;
    }
    for (const c of checks) {
      if (c.status !== 'FAILURE' && c.status !== 'WARNING') continue;
      const why = `${c.errorMessage ?? ''} ${JSON.stringify(c.details ?? {})}`;
      if (!explained.test(why)) bad.push(`${dir}: ${c.id}: ${c.errorMessage}`);
    }
  }
  return bad;
}
