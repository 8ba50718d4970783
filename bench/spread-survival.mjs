// Lever 31 (docs/performance.md): on Node 20 (V8 11.3), an object made by a spread followed by more members
// (`{ ...source, more }`) survives the young generation's collections, and is promoted, though nothing refers to it.
// Each way of building the same object runs in a process of its own (a fresh heap), and the collections it caused are
// read with `--trace-gc-nvp`: per scavenge, the bytes that survived it, the bytes promoted, and its pause.
// Usage: `node bench/spread-survival.mjs` (about 10 s).
import { execFileSync } from 'node:child_process';

const WAYS = {
  'spread, then a member': 'o = { ...source, c: i }',
  'two spreads': 'o = { ...source, ...{ c: i } }',
  'Object.assign, with the member': 'o = Object.assign({}, source, { c: i })',
  'a literal': 'o = { a: source.a, b: source.b, c: i }',
  'spread alone': 'o = { ...source }',
};

const loop = (build) => `
  let o, sum = 0;
  for (let i = 0; i < 3e6; i++) {
    const source = { a: 'x' + i, b: 2 };
    ${build};
    sum += o.b;
  }
  if (sum !== 6e6) throw new Error('unexpected sum');`;

console.log(`node ${process.version} (V8 ${process.versions.v8}), 3M objects per way`);
console.log('way'.padEnd(32), 'scavenges', 'survived KB', 'promoted KB', 'pause ms', 'full GCs');
for (const [name, build] of Object.entries(WAYS)) {
  const out = execFileSync(process.execPath, ['--trace-gc-nvp', '-e', loop(build)], { encoding: 'utf8' });
  const scavenges = out.split('\n').filter((l) => l.includes(' gc=s '));
  const field = (line, key) => Number(line.match(new RegExp(` ${key}=([\\d.]+)`))?.[1] ?? 0);
  const mean = (key) => scavenges.reduce((sum, l) => sum + field(l, key), 0) / Math.max(1, scavenges.length);
  const full = out.split('\n').filter((l) => l.includes(' gc=mc ')).length;
  console.log(
    name.padEnd(32),
    String(scavenges.length).padStart(9),
    (mean('new_space_survived') / 1024).toFixed(0).padStart(11),
    (mean('promoted') / 1024).toFixed(0).padStart(11),
    mean('pause').toFixed(2).padStart(8),
    String(full).padStart(8),
  );
}
