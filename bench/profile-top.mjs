// Where the time goes: the functions with the most self time in V8 CPU profiles (`BENCH_CPU_PROF=<dir> npm run
// bench` writes one per server). Usage: `node bench/profile-top.mjs <file.cpuprofile|dir> [count]`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const [target, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 15);
const files = statSync(target).isDirectory()
  ? readdirSync(target)
      .filter((f) => f.endsWith('.cpuprofile'))
      .map((f) => join(target, f))
  : [target];

/** Self time per function (name, file, line), as a share of the samples that were not idle. */
function top(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let busy = 0;
  for (const id of profile.samples) {
    const { callFrame: f } = byId.get(id);
    if (f.functionName === '(idle)' || f.functionName === '(program)') continue;
    busy++;
    const where = f.url ? `${relative(process.cwd(), f.url.replace('file://', ''))}:${f.lineNumber + 1}` : '';
    const key = `${f.functionName || '(anonymous)'} ${where}`;
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const ranked = [...self].sort((a, b) => b[1] - a[1]).slice(0, count);
  return { busy, ranked };
}

for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const { busy, ranked } = top(profile);
  const urls = profile.nodes.map((n) => n.callFrame.url).join(' ');
  const who = urls.includes('oidc-provider')
    ? 'oidc-provider'
    : urls.includes(`${process.cwd()}/dist/`)
      ? 'svc'
      : 'other';
  const interval = (profile.endTime - profile.startTime) / profile.samples.length / 1000;
  console.log(`\n${file} (${who}; ${busy} busy samples of ~${interval.toFixed(2)} ms)`);
  for (const [key, n] of ranked) console.log(`${((100 * n) / busy).toFixed(1).padStart(6)} %  ${key}`);
}
