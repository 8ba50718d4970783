// Turns a `BENCH_JSON` dump into the Markdown of docs/performance.md's figures section:
// `node bench/results-md.mjs results.json [--into docs/performance.md]` (replaces the text between the
// `<!-- figures:start -->` and `<!-- figures:end -->` markers).
import { readFileSync, writeFileSync } from 'node:fs';

const [file, flag, target] = process.argv.slice(2);
const { meta, results, verdicts } = JSON.parse(readFileSync(file, 'utf8'));

const cell = (v) => (v === undefined || v === null ? '–' : String(v));
const lines = [
  `Run of ${meta.started.slice(0, 16).replace('T', ' ')}–${meta.finished.slice(11, 16)} UTC: node ${meta.node}, ` +
    `${meta.cpu}; load average ${meta.loadavgAtStart.map((l) => l.toFixed(2)).join(' ')} at the start, ` +
    `${meta.loadavgAtEnd.map((l) => l.toFixed(2)).join(' ')} at the end; servers ${meta.pinned ? 'pinned to core 0' : 'unpinned'}; ` +
    `${meta.options.rounds} rounds × ${meta.options.seconds} s per side` +
    (meta.options.growthRounds
      ? ` (${meta.options.growthRounds} for the growth tables' refresh rotations)`
      : '') +
    `, ${meta.options.connections} connections ` +
    `(HTTP sides), ${meta.options.chains} concurrent refresh chains` +
    (meta.quiet ? `; at the start, ${meta.quiet.note}.` : '.'),
];
for (const [title, rows] of Object.entries(results)) {
  const base = rows.find((r) => r.baseline) ?? rows[0];
  lines.push(
    '',
    `**${title}**`,
    '',
    '| side | CPU µs/op | (min–max) | ÷ baseline | ops/s | p50 ms | p99 ms |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  );
  for (const r of rows) {
    const ratio = r === base ? '' : (r.cpuUs / base.cpuUs).toFixed(2);
    const cpu = r.ownCpuUs === undefined ? cell(r.cpuUs) : `${r.cpuUs} (process ${r.ownCpuUs})`;
    lines.push(
      `| ${r.name} | ${cpu} | ${r.cpuMin}–${r.cpuMax} | ${ratio} | ${r.opsPerSec} | ${cell(r.p50)} | ${cell(r.p99)} |`,
    );
  }
}
lines.push('', '**Targets and findings**', '');
for (const v of verdicts) {
  lines.push(
    v.target ? `- ${v.label}: ${v.value} — **${v.ok ? 'meets' : 'misses'}** (${v.target})` : `- ${v.label}`,
  );
}
const markdown = lines.join('\n');

if (flag === '--into') {
  const doc = readFileSync(target, 'utf8');
  const start = '<!-- figures:start -->';
  const end = '<!-- figures:end -->';
  const a = doc.indexOf(start);
  const b = doc.indexOf(end);
  if (a < 0 || b < a) throw new Error(`${target} lacks the ${start} … ${end} markers`);
  writeFileSync(target, `${doc.slice(0, a + start.length)}\n${markdown}\n${doc.slice(b)}`);
} else {
  console.log(markdown);
}
