// Agency MCP server (issue 5): tools/call list_clients on the 2026-07-28 and 2025-11-25 wires with an OAuth access
// token from the real flow (the dashboard API token exchange cached, embedded database), beside the SDK's plain
// createMcpHandler serving one trivial tool with no auth (the same baseline as bench/mcp.mjs), in the same run.
// Target (issue 5): ≥ 1.5× the baseline's req/s with p99 ≤ 15 ms at 50 connections.
// Standalone: `npm run build && node bench/agency-mcp.mjs`.
import { MODERN, measure, printTable, spawnServer, startSvc, toolsCall } from './lib.mjs';
import { connectAgent } from './oauth-flow.mjs';

const LEGACY = '2025-11-25';
const BASELINE = `SDK createMcpHandler, trivial tool, no auth, ${MODERN} (baseline)`;

export async function run({ seconds = 5 } = {}) {
  const rows = [];
  const baseline = await spawnServer(['bench/mcp-baseline-server.mjs'], { ready: /baseline (http:\/\/\S+)/ });
  try {
    rows.push(
      await measure(BASELINE, {
        url: baseline.match[1],
        pid: baseline.pid,
        seconds,
        ...toolsCall(MODERN, 'ping'),
      }),
    );
  } finally {
    await baseline.stop();
  }
  const svc = await startSvc({ only: 'agency-mcp,auth', env: { DCR_LIMIT_PER_IP: '100000' } });
  try {
    const url = `${svc.urls['agency-mcp']}/mcp`;
    const auth = { authorization: `Bearer ${(await connectAgent(svc.urls.auth, url)).tokens.access_token}` };
    for (const wire of [MODERN, LEGACY]) {
      const name = `agency MCP tools/call list_clients, ${wire}`;
      rows.push(
        await measure(name, { url, pid: svc.pid, seconds, ...toolsCall(wire, 'list_clients', auth) }),
      );
    }
  } finally {
    await svc.stop();
  }
  printTable('Agency MCP server, 50 connections', rows, BASELINE);
  for (const r of rows.slice(1)) {
    const ratio = (r.reqPerSec / rows[0].reqPerSec).toFixed(2);
    const verdict = r.reqPerSec >= 1.5 * rows[0].reqPerSec && r.p99 <= 15 ? 'meets' : 'MISSES';
    console.log(
      `${r.name}: ${ratio}× baseline req/s, p99 ${r.p99} ms — ${verdict} the target (≥ 1.5×, p99 ≤ 15 ms)`,
    );
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`)
  await run({ seconds: Number(process.env.BENCH_SECONDS ?? 5) });
