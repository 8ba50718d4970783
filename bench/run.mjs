// `npm run bench`: every benchmark, each reporting figures against a baseline measured in the same run.
import { existsSync } from 'node:fs';
import { pinned } from './lib.mjs';

const seconds = Number(process.env.BENCH_SECONDS ?? 5);
console.log(
  `node ${process.version}; servers ${pinned ? 'pinned to core 0, load on the rest' : 'unpinned (no taskset)'}; ${seconds} s per scenario`,
);

const suites = ['rest', 'mcp', 'agency-mcp', 'refresh'];
for (const suite of suites) {
  const file = new URL(`./${suite}.mjs`, import.meta.url);
  if (!existsSync(file)) continue;
  const { run } = await import(file.href);
  await run({ seconds });
}
