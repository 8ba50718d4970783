// `npm run bench`: every benchmark, each side measured against its baselines and peers in the same run.
// Options (environment): BENCH_SCENARIOS (comma list of rest, mcp, agency-mcp, refresh, growth; default all),
// BENCH_SECONDS (per side and round, default 5), BENCH_ROUNDS (default 3), BENCH_GROWTH_ROUNDS (the growth tables'
// refresh rotations, default 6), BENCH_CONNECTIONS (default 50),
// BENCH_CHAINS (concurrent refresh chains, default 20), BENCH_GROWTH_ROWS (default 1,000,000),
// BENCH_DISTINCT_TOKENS (default 100,000), BENCH_JSON (write every table there), BENCH_CHART (the SVG chart's path,
// default docs/performance-growth.svg; `none` for no chart), BENCH_CPU_PROF=<dir> (V8 CPU profiles of the servers),
// BENCH_HEAP_PROF=<dir> (what the servers allocate: bench/heap-sampling.mjs), BENCH_QUIET_SECONDS (how long to wait at
// the start for the machine to be quiet: bench/quiet-machine.mjs; default 180, 0 not to wait).
import { writeFileSync } from 'node:fs';
import { cpus, loadavg } from 'node:os';
import { machineRelativeNote, note, options, pinned, results, verdicts } from './lib.mjs';
import { waitForQuietMachine } from './quiet-machine.mjs';

const all = ['rest', 'mcp', 'agency-mcp', 'refresh', 'growth'];
const chosen = (process.env.BENCH_SCENARIOS ?? all.join(',')).split(',').map((s) => s.trim());
const unknown = chosen.filter((s) => !all.includes(s));
if (unknown.length)
  throw new Error(`BENCH_SCENARIOS: unknown ${unknown.join(', ')} (known: ${all.join(', ')})`);

const quiet = await waitForQuietMachine(Number(process.env.BENCH_QUIET_SECONDS ?? 180));
const started = new Date();
const loadavgAtStart = loadavg();
console.log(
  `node ${process.version}; ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}; load average ${loadavg()
    .map((l) => l.toFixed(2))
    .join(
      ' ',
    )}; servers ${pinned ? 'pinned to core 0, load generator on the rest' : 'unpinned (no taskset)'}; ` +
    `${options.rounds} rounds × ${options.seconds} s per side, ${options.connections} connections; ${quiet.note}`,
);

const growth = {};
for (const suite of all.filter((s) => chosen.includes(s))) {
  const { run } = await import(new URL(`./${suite}.mjs`, import.meta.url).href);
  const out = await run();
  if (suite === 'growth') Object.assign(growth, out);
}

const relative = machineRelativeNote(results);
if (relative) {
  console.log('\nThe tool calls against the machine');
  note(relative);
}

if (process.env.BENCH_JSON) {
  const meta = {
    started: started.toISOString(),
    finished: new Date().toISOString(),
    node: process.version,
    cpu: `${cpus().length} × ${cpus()[0]?.model}`,
    loadavgAtStart,
    loadavgAtEnd: loadavg(),
    quiet,
    pinned,
    options,
  };
  writeFileSync(process.env.BENCH_JSON, JSON.stringify({ meta, results, verdicts }, null, 2));
}
const chartPath = process.env.BENCH_CHART ?? 'docs/performance-growth.svg';
if (growth.series && chartPath !== 'none') {
  const { growthChart } = await import('./chart.mjs');
  writeFileSync(chartPath, growthChart(growth.series));
  console.log(`\nchart written to ${chartPath}`);
}
console.log(
  `load average at the end: ${loadavg()
    .map((l) => l.toFixed(2))
    .join(' ')}`,
);
