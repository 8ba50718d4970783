// Where the time goes: the functions with the most self time in V8 CPU profiles (`BENCH_CPU_PROF=<dir> npm run
// bench` writes one per server), and the functions that allocate the most in heap profiles (`BENCH_HEAP_PROF=<dir>`,
// bench/heap-sampling.mjs). Usage: `node bench/profile-top.mjs <file.cpuprofile|file.heapprofile|dir> [count]`.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const [target, countArg] = process.argv.slice(2);
const count = Number(countArg ?? 15);
const files = statSync(target).isDirectory()
  ? readdirSync(target)
      .filter((f) => f.endsWith('.cpuprofile') || f.endsWith('.heapprofile'))
      .map((f) => join(target, f))
  : [target];

/** A function's place: its file relative to the working directory, and its line. */
const where = (f) =>
  f.url ? `${relative(process.cwd(), f.url.replace('file://', ''))}:${f.lineNumber + 1}` : '';

/** Self time per function (name, file, line), as a share of the samples that were not idle. */
function top(profile) {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  let busy = 0;
  for (const id of profile.samples) {
    const { callFrame: f } = byId.get(id);
    if (f.functionName === '(idle)' || f.functionName === '(program)') continue;
    busy++;
    const key = `${f.functionName || '(anonymous)'} ${where(f)}`;
    self.set(key, (self.get(key) ?? 0) + 1);
  }
  const ranked = [...self].sort((a, b) => b[1] - a[1]).slice(0, count);
  return { busy, ranked };
}

/**
 * Bytes allocated per function (name, file, line) in a sampling heap profile, as a share of all sampled bytes, and
 * the scripts the profile saw (to tell whose process it was).
 */
function topAllocations(profile) {
  const self = new Map();
  const urls = [];
  let total = 0;
  const walk = (node) => {
    const key = `${node.callFrame.functionName || '(anonymous)'} ${where(node.callFrame)}`;
    self.set(key, (self.get(key) ?? 0) + node.selfSize);
    urls.push(node.callFrame.url);
    total += node.selfSize;
    node.children.forEach(walk);
  };
  walk(profile.head);
  return { total, urls, ranked: [...self].sort((a, b) => b[1] - a[1]).slice(0, count) };
}

const whose = (urls) =>
  urls.includes('oidc-provider')
    ? 'oidc-provider'
    : urls.includes(`${process.cwd()}/dist/`)
      ? 'svc'
      : 'other';

for (const file of files) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  if (file.endsWith('.heapprofile')) {
    const { total, urls, ranked } = topAllocations(profile);
    console.log(
      `\n${file} (${whose(urls.join(' '))}; ${(total / 1e6).toFixed(1)} MB in the sampled objects)`,
    );
    for (const [key, bytes] of ranked)
      console.log(`${((100 * bytes) / total).toFixed(1).padStart(6)} %  ${key}`);
    continue;
  }
  const { busy, ranked } = top(profile);
  const who = whose(profile.nodes.map((n) => n.callFrame.url).join(' '));
  const interval = (profile.endTime - profile.startTime) / profile.samples.length / 1000;
  console.log(`\n${file} (${who}; ${busy} busy samples of ~${interval.toFixed(2)} ms)`);
  for (const [key, n] of ranked) console.log(`${((100 * n) / busy).toFixed(1).padStart(6)} %  ${key}`);
}
