// User MCP server: tools/call get_me on the 2026-07-28 and 2025-11-25 wires (session token, embedded database),
// beside the SDK's plain createMcpHandler serving one trivial tool with no auth (the baseline), in the same run.
// Target: p99 ≤ 10 ms at 50 connections on both wires.
import {
  MODERN,
  compare,
  httpSide,
  sessionToken,
  spawnServer,
  startSvc,
  toolsCall,
  verdict,
} from './lib.mjs';

const LEGACY = '2025-11-25';
const BASELINE = `SDK createMcpHandler, trivial tool, no auth, ${MODERN} (baseline)`;

export async function run() {
  const baseline = await spawnServer(['bench/mcp-baseline-server.mjs'], { ready: /baseline (http:\/\/\S+)/ });
  const svc = await startSvc({ only: 'mcp,auth' });
  try {
    const auth = { authorization: `Bearer ${await sessionToken(svc.urls.auth)}` };
    const base = { url: baseline.match[1], pid: baseline.pid };
    const url = `${svc.urls.mcp}/mcp`;
    const wires = [MODERN, LEGACY];
    const t = await compare(
      'User MCP server, 50 connections',
      [
        httpSide(BASELINE, { ...base, ...toolsCall(MODERN, 'ping') }),
        httpSide(`SDK createMcpHandler, trivial tool, no auth, ${LEGACY}`, {
          ...base,
          ...toolsCall(LEGACY, 'ping'),
        }),
        ...wires.map((w) =>
          httpSide(`user MCP tools/call get_me, ${w}`, {
            url,
            pid: svc.pid,
            ...toolsCall(w, 'get_me', auth),
          }),
        ),
      ],
      { baseline: BASELINE },
    );
    for (const w of wires) {
      const r = t[`user MCP tools/call get_me, ${w}`];
      verdict(`get_me ${w}: p99`, `${r.p99} ms (${r.cpuUs} CPU µs/call)`, r.p99 <= 10, 'p99 ≤ 10 ms');
    }
    return t;
  } finally {
    await svc.stop();
    await baseline.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
