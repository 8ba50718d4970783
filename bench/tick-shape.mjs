// Lever 32 (docs/performance.md): a full collection on an idle server can make V8 forget the shape of
// `process.nextTick`'s entries, and node:http then builds each one through V8's runtime for the rest of the process's
// life. Plain node:http servers (the bare baseline's answer), half of them with src/base/tick-shape.ts's entry kept,
// each: warmed up, then collected as V8's memory reducer collects an idle server (`gc()` four times, with
// `--retain-maps-for-n-gc=0` so that a collection drops what such a collection drops), then measured in alternating
// rounds by CPU µs per request; at the end each prints the state of nextTick's four literal stores
// (`%DebugPrint`). Usage: `npm run build && node bench/tick-shape.mjs` (about 1 min).
import { cpuSeconds, httpSide, spawnServer } from './lib.mjs';

const PER_VARIANT = Number(process.env.TICK_SHAPE_SERVERS ?? 3);
const ROUNDS = 3;
const SECONDS = 3;

const SERVER = (keep) => `
  import { createServer } from 'node:http';
  ${keep ? `(await import(${JSON.stringify(new URL('../dist/base/tick-shape.js', import.meta.url).pathname)})).keepTickObjectShape();` : ''}
  const body = JSON.stringify({ object: 'user', id: 'usr_0000000000000000000000', username: 'ada', image_url: null });
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
  process.on('SIGUSR2', () => { for (let i = 0; i < 4; i++) globalThis.gc(); });
  process.on('SIGTERM', () => {
    %DebugPrint(process.nextTick);
    server.close();
    server.closeAllConnections();
  });
  server.listen(0, '127.0.0.1', () => console.log('plain http://127.0.0.1:' + server.address().port));
`;

const FLAGS = [
  '--allow-natives-syntax',
  '--expose-gc',
  '--retain-maps-for-n-gc=0',
  '--input-type=module',
  '-e',
];

const servers = [];
for (const keep of [false, true]) {
  for (let i = 0; i < PER_VARIANT; i++) {
    const server = await spawnServer([...FLAGS, SERVER(keep)], { ready: /plain (http:\/\/\S+)/ });
    const side = httpSide(`${keep ? 'entry kept' : 'as Node leaves it'} ${i + 1}`, {
      url: server.match[1],
      pid: server.pid,
    });
    servers.push({ keep, server, side, cpu: [] });
  }
}
for (const s of servers) {
  await s.side.run(2);
  process.kill(s.server.pid, 'SIGUSR2');
}
await new Promise((resolve) => setTimeout(resolve, 500));
for (let round = 0; round < ROUNDS; round++) {
  for (const s of round % 2 ? [...servers].reverse() : servers) {
    const before = cpuSeconds(s.server.pid);
    const { ops } = await s.side.run(SECONDS);
    s.cpu.push(((cpuSeconds(s.server.pid) - before) * 1e6) / ops);
  }
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(
  `node ${process.version} (V8 ${process.versions.v8}), ${ROUNDS} rounds × ${SECONDS} s, 50 connections`,
);
console.log('server'.padEnd(22), 'CPU µs/req', 'nextTick literal stores');
for (const s of servers) {
  await s.server.stop();
  const states = [...s.server.output().matchAll(/DefineKeyedOwnPropertyInLiteral ([A-Z_]+)/g)].map(
    (m) => m[1],
  );
  console.log(
    s.side.name.padEnd(22),
    median(s.cpu).toFixed(1).padStart(10),
    states.join(' ') || '(not printed)',
  );
}
