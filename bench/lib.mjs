// Shared benchmark plumbing: servers run in child processes pinned to core 0 (when taskset exists), the load
// generator in this process, so every figure of one run is measured under the same conditions.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';

const hasTaskset = (() => {
  try {
    execFileSync('taskset', ['-c', '0', 'true']);
    return true;
  } catch {
    return false;
  }
})();

/** Spawns `node args...` pinned to core 0 and resolves once its output matches `ready` (group 1 = the URL(s)). */
export async function spawnServer(args, { env = {}, ready, timeoutMs = 30_000 } = {}) {
  // BENCH_CPU_PROF=<dir>: every server writes a V8 CPU profile there when it stops (open it in Chrome DevTools).
  const profile = process.env.BENCH_CPU_PROF
    ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`]
    : [];
  const nodeArgs = [...profile, ...args];
  const cmd = hasTaskset ? 'taskset' : process.execPath;
  const argv = hasTaskset ? ['-c', '0', process.execPath, ...nodeArgs] : nodeArgs;
  const child = spawn(cmd, argv, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const match = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${output}`)), timeoutMs);
    const onData = (chunk) => {
      output += chunk.toString();
      const m = ready.exec(output);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', (code) => reject(new Error(`server exited with ${code}:\n${output}`)));
  });
  return {
    match,
    pid: child.pid,
    output: () => output,
    stop: () =>
      new Promise((resolve) => {
        child.removeAllListeners('exit');
        child.on('exit', resolve);
        child.kill('SIGTERM');
      }),
  };
}

/** Starts the service from the build (`npm run bench` builds first) over a throwaway embedded database. */
export async function startSvc({ only = 'api,auth', env = {} } = {}) {
  const dataDir = mkdtempSync(join(tmpdir(), 'svc-bench-'));
  const server = await spawnServer(['bin/svc.js', 'start', '--only', only], {
    env: {
      LOG_LEVEL: 'warn',
      API_PORT: '0',
      MCP_PORT: '0',
      AGENCY_MCP_PORT: '0',
      AUTH_PORT: '0',
      DATA_DIR: dataDir,
      ...env,
    },
    ready: /demo users/,
  });
  const urls = Object.fromEntries(
    [...server.output().matchAll(/^\s+([a-z-]+)\s+(http:\/\/\S+)$/gm)].map((m) => [m[1], m[2]]),
  );
  return {
    urls,
    pid: server.pid,
    async stop() {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

export async function sessionToken(authUrl, username = 'ada') {
  const res = await fetch(`${authUrl}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: `${username}-demo-password` }),
  });
  if (res.status !== 201) throw new Error(`sign-in failed: ${res.status}`);
  return (await res.json()).token;
}

/** CPU seconds (user + system) a process has used, from /proc; undefined where /proc is absent. */
function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return undefined;
  }
}

/**
 * Load for `seconds` after a 1 s warm-up; fails loudly if any response was not a 2xx. Besides req/s and latency it
 * reports the server's CPU time per request (`pid`), which other load on the machine does not distort.
 */
export async function measure(name, { url, pid, connections = 50, seconds = 5, ...request }) {
  await autocannon({ url, connections, duration: 1, ...request });
  const cpuBefore = pid && cpuSeconds(pid);
  const r = await autocannon({ url, connections, duration: seconds, ...request });
  const cpuAfter = pid && cpuSeconds(pid);
  const bad = r.non2xx + r.errors + r.timeouts;
  if (bad > 0) throw new Error(`${name}: ${bad} failed responses of ${r.requests.total}`);
  const cpuUsPerReq =
    cpuBefore !== undefined && cpuAfter !== undefined
      ? ((cpuAfter - cpuBefore) * 1e6) / r.requests.total
      : undefined;
  return {
    name,
    reqPerSec: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    total: r.requests.total,
    cpuUsPerReq: cpuUsPerReq && Math.round(cpuUsPerReq * 10) / 10,
  };
}

export function printTable(title, rows, baselineName) {
  const base = rows.find((r) => r.name === baselineName);
  const col = (v, w) => String(v ?? '-').padStart(w);
  console.log(`\n${title}`);
  console.log(
    `${'scenario'.padEnd(46)}${col('req/s', 9)}${col('p50 ms', 8)}${col('p99 ms', 8)}${col('÷ base', 8)}${col('CPU µs/req', 12)}${col('base ÷ CPU', 11)}`,
  );
  for (const r of rows) {
    const ratio = base ? (r.reqPerSec / base.reqPerSec).toFixed(2) : '';
    const cpuRatio = base?.cpuUsPerReq && r.cpuUsPerReq ? (base.cpuUsPerReq / r.cpuUsPerReq).toFixed(2) : '';
    console.log(
      `${r.name.padEnd(46)}${col(r.reqPerSec, 9)}${col(r.p50, 8)}${col(r.p99, 8)}${col(ratio, 8)}${col(r.cpuUsPerReq, 12)}${col(cpuRatio, 11)}`,
    );
  }
}

export const pinned = hasTaskset;

/** The 2026-07-28 revision: per-request `_meta` envelope and `Mcp-Method`/`Mcp-Name` headers. */
export const MODERN = '2026-07-28';

/** One tools/call as autocannon sends it: the 2026-07-28 envelope and headers, or a stateless 2025-11-25 POST. */
export function toolsCall(wire, tool, extraHeaders = {}) {
  const modern = wire === MODERN;
  const params = { name: tool, arguments: {} };
  if (modern) {
    params._meta = {
      'io.modelcontextprotocol/protocolVersion': MODERN,
      'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1.0.0' },
      'io.modelcontextprotocol/clientCapabilities': {},
    };
  }
  return {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': wire,
      ...(modern ? { 'mcp-method': 'tools/call', 'mcp-name': tool } : {}),
      ...extraHeaders,
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params }),
  };
}
