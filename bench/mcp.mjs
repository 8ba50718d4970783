// User MCP server: tools/call get_me on the 2026-07-28 and 2025-11-25 wires (session token, embedded database), beside
// the SDK's plain createMcpHandler serving one trivial tool with no auth (the baseline), in the same run.
// Target (issue 3): ≥ 2× the baseline's req/s with p99 ≤ 10 ms at 50 connections.
import { MODERN, measure, printTable, sessionToken, spawnServer, startSvc, toolsCall } from './lib.mjs';

const LEGACY = '2025-11-25';
const BASELINE = `SDK createMcpHandler, trivial tool, no auth, ${MODERN} (baseline)`;

export async function run({ seconds = 5 } = {}) {
  const rows = [];
  const baseline = await spawnServer(['bench/mcp-baseline-server.mjs'], { ready: /baseline (http:\/\/\S+)/ });
  try {
    const url = baseline.match[1];
    rows.push(await measure(BASELINE, { url, pid: baseline.pid, seconds, ...toolsCall(MODERN, 'ping') }));
    const legacyName = `SDK createMcpHandler, trivial tool, no auth, ${LEGACY}`;
    rows.push(await measure(legacyName, { url, pid: baseline.pid, seconds, ...toolsCall(LEGACY, 'ping') }));
  } finally {
    await baseline.stop();
  }
  const svc = await startSvc({ only: 'mcp,auth' });
  try {
    const auth = { authorization: `Bearer ${await sessionToken(svc.urls.auth)}` };
    const url = `${svc.urls.mcp}/mcp`;
    for (const wire of [MODERN, LEGACY]) {
      const name = `user MCP tools/call get_me, ${wire}`;
      rows.push(await measure(name, { url, pid: svc.pid, seconds, ...toolsCall(wire, 'get_me', auth) }));
    }
  } finally {
    await svc.stop();
  }
  printTable('User MCP server, 50 connections', rows, BASELINE);
  for (const r of rows.slice(2)) {
    const ratio = (r.reqPerSec / rows[0].reqPerSec).toFixed(2);
    const verdict = r.reqPerSec >= 2 * rows[0].reqPerSec && r.p99 <= 10 ? 'meets' : 'MISSES';
    console.log(
      `${r.name}: ${ratio}× baseline req/s, p99 ${r.p99} ms — ${verdict} the target (≥ 2×, p99 ≤ 10 ms)`,
    );
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`)
  await run({ seconds: Number(process.env.BENCH_SECONDS ?? 5) });
