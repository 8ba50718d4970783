// Agency MCP server: tools/call list_clients on the 2026-07-28 and 2025-11-25 wires and the write tool create_task,
// with an OAuth access token from the real flow (the token exchange cached, embedded database), beside the SDK's
// plain createMcpHandler serving one trivial tool with no auth, in the same run.
// Target: ≤ 100 CPU µs per call and p99 ≤ 15 ms at 50 connections, for list_clients and for create_task.
import { MODERN, compare, httpSide, spawnServer, startSvc, toolsCall, verdict } from './lib.mjs';
import { connectAgent } from './oauth-flow.mjs';

const LEGACY = '2025-11-25';
const BASELINE = `SDK createMcpHandler, trivial tool, no auth, ${MODERN} (baseline)`;

/** One tools/call answered by the server, for setup (the project a task is created in). */
async function callTool(url, auth, tool, args = {}) {
  const { method, headers, body } = toolsCall(MODERN, tool, auth, args);
  const res = await fetch(url, { method, headers, body });
  const json = await res.json();
  if (!json.result || json.result.isError) throw new Error(`${tool}: ${JSON.stringify(json)}`);
  return json.result.structuredContent;
}

export async function run() {
  const baseline = await spawnServer(['bench/mcp-baseline-server.mjs'], { ready: /baseline (http:\/\/\S+)/ });
  const svc = await startSvc({ only: 'agency-mcp,auth', env: { DCR_LIMIT_PER_IP: '100000' } });
  try {
    const url = `${svc.urls['agency-mcp']}/mcp`;
    const { tokens } = await connectAgent(svc.urls.auth, url, { scope: 'agency:mcp:read agency:mcp:write' });
    const auth = { authorization: `Bearer ${tokens.access_token}` };
    const projects = await callTool(url, auth, 'list_projects');
    const projectId = (projects.data ?? projects.projects ?? Object.values(projects).find(Array.isArray))[0]
      .id;
    const task = { project_id: projectId, title: 'Benchmark task' };
    const side = (name, wire, tool, args) =>
      httpSide(name, { url, pid: svc.pid, ...toolsCall(wire, tool, auth, args) });
    const t = await compare(
      'Agency MCP server, 50 connections',
      [
        httpSide(BASELINE, { url: baseline.match[1], pid: baseline.pid, ...toolsCall(MODERN, 'ping') }),
        side(`agency MCP tools/call list_clients, ${MODERN}`, MODERN, 'list_clients'),
        side(`agency MCP tools/call list_clients, ${LEGACY}`, LEGACY, 'list_clients'),
        side(`agency MCP tools/call create_task, ${MODERN}`, MODERN, 'create_task', task),
      ],
      { baseline: BASELINE },
    );
    for (const [name, r] of Object.entries(t).slice(1)) {
      const ok = r.cpuUs <= 100 && r.p99 <= 15;
      verdict(name, `${r.cpuUs} CPU µs/call, p99 ${r.p99} ms`, ok, '≤ 100 µs, p99 ≤ 15 ms');
    }
    return t;
  } finally {
    await svc.stop();
    await baseline.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
