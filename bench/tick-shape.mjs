// Lever 32 (docs/performance.md): a full collection on an idle server can make V8 forget the shape of
// `process.nextTick`'s entries, and node:http then builds each one through V8's runtime for the rest of the process's
// life. The bench's bare baseline (bench/bare-server.mjs), several servers, half of them with src/base/tick-shape.ts's
// entry kept, each: warmed up, then collected as V8's memory reducer collects an idle server (`gc()` four times, with
// `--retain-maps-for-n-gc=0` so that a collection drops what such a collection drops), then measured like every table
// of the bench (`compare`: CPU µs per request, alternating rounds). The state V8 is left in is read by
// test/unit/tick-shape.test.ts. Usage: `npm run build && node bench/tick-shape.mjs` (about 2 min).
import { compare, httpSide, spawnServer } from './lib.mjs';

const PER_VARIANT = Number(process.env.TICK_SHAPE_SERVERS ?? 3);

/** Loaded before the bare server (`--import`): collects on SIGUSR2 and, when `keep`, keeps the entry. */
const prepare = (keep) => {
  const tickShape = new URL('../dist/base/tick-shape.js', import.meta.url).href;
  const source = `process.on('SIGUSR2', () => { for (let i = 0; i < 4; i++) globalThis.gc(); });
    ${keep ? `(await import(${JSON.stringify(tickShape)})).keepTickObjectShape();` : ''}`;
  return `--import=data:text/javascript,${encodeURIComponent(source)}`;
};

const FLAGS = ['--expose-gc', '--retain-maps-for-n-gc=0'];

const servers = [];
for (const keep of [false, true]) {
  for (let i = 0; i < PER_VARIANT; i++) {
    const server = await spawnServer([...FLAGS, prepare(keep), 'bench/bare-server.mjs'], {
      ready: /bare (http:\/\/\S+)/,
    });
    const side = httpSide(`${keep ? 'entry kept' : 'as Node leaves it'} ${i + 1}`, {
      url: server.match[1],
      pid: server.pid,
    });
    servers.push({ server, side });
  }
}
// Warmed up, then collected as an idle server is, before the table's own warm-up and rounds.
for (const s of servers) {
  await s.side.run(2);
  process.kill(s.server.pid, 'SIGUSR2');
}
await new Promise((resolve) => setTimeout(resolve, 500));
console.log(`node ${process.version} (V8 ${process.versions.v8})`);
await compare(
  'Bare node:http servers collected as an idle server is',
  servers.map((s) => s.side),
  { baseline: servers[0].side.name },
);
for (const s of servers) await s.server.stop();
