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
  // BENCH_HEAP_PROF=<dir>: every server samples what it allocates and writes a heap profile there when it stops.
  if (process.env.BENCH_HEAP_PROF)
    profile.push(`--import=${new URL('heap-sampling.mjs', import.meta.url).pathname}`);
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
        // A server paused by `runAlone` when the bench stopped early would hold the SIGTERM until resumed.
        child.kill('SIGCONT');
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
    dataDir,
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

/** CPU seconds (user + system, every thread) a process has used, from /proc; undefined where /proc is absent. */
export function cpuSeconds(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return undefined;
  }
}

/** Resident memory of a process in MiB (VmRSS), or undefined. */
export function rssMiB(pid) {
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^VmRSS:\s+(\d+) kB/m);
    return line ? Math.round(Number(line[1]) / 1024) : undefined;
  } catch {
    return undefined;
  }
}

/** Bench options, all from the environment so that `npm run bench` needs no arguments. */
export const options = {
  seconds: Number(process.env.BENCH_SECONDS ?? 5),
  rounds: Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3)),
  connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
  chains: Number(process.env.BENCH_CHAINS ?? 20),
  /**
   * Rounds of the growth tables' refresh rotations, whose verdict is a ratio within ±20 %: more than the other tables,
   * as three rounds cannot tell a 20 % step from this machine's draw (docs/performance.md, Method).
   */
  growthRounds: Math.max(1, Number(process.env.BENCH_GROWTH_ROUNDS ?? 6)),
  /** Rows in refresh_tokens for the largest data-size step (connections are a tenth of it). */
  growthRows: Number(process.env.BENCH_GROWTH_ROWS ?? 1_000_000),
  distinctTokens: Number(process.env.BENCH_DISTINCT_TOKENS ?? 100_000),
};

/**
 * A side measured by autocannon: `connections` keep-alive connections for `seconds`; fails loudly on any response
 * that is not a 2xx. `request` may carry autocannon's `requests` (e.g. a setupRequest that varies the token).
 */
export function httpSide(name, { url, pid, pgApp, connections = options.connections, ...request }) {
  return {
    name,
    pid,
    pgApp,
    async run(seconds) {
      const r = await autocannon({ url, connections, duration: seconds, ...request });
      const bad = r.non2xx + r.errors + r.timeouts;
      if (bad > 0) throw new Error(`${name}: ${bad} failed responses of ${r.requests.total}`);
      return { ops: r.requests.total, seconds: r.duration, p50: r.latency.p50, p99: r.latency.p99 };
    },
  };
}

/** Latency percentiles (ms, two decimals) of a list of samples in ms. */
export function percentiles(samples) {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (p) => sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? NaN;
  return { p50: Math.round(at(50) * 100) / 100, p99: Math.round(at(99) * 100) / 100 };
}

const median = (values) => {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return undefined;
  const mid = v.length >> 1;
  return v.length % 2 ? v[mid] : (v[mid - 1] + v[mid]) / 2;
};

/**
 * `side` ÷ `base` by CPU µs per operation, as the median of the ratios of each round: the two measured back to back
 * (compare's `order`), each ratio is taken within one state of the machine, whose draw then cancels. On this
 * machine's shared cores a side's rounds spread up to 1.9×, so a ratio of two medians taken minutes apart can read
 * the draw as a difference (an A/A check of both readings: docs/performance.md, Method). Returns the ratio and the
 * rounds' ratios.
 */
export function pairedRatio(base, side) {
  const rounds = side.cpuRounds.map((cpu, i) => cpu / base.cpuRounds[i]);
  return { ratio: median(rounds), rounds };
}

/**
 * How a target line names a paired ratio: its rounds, and beside them the ratio of the two sides' medians (the
 * reading before 2026-11-25, what the table's "÷ base" column shows), so that a reader sees both. `measured` says how
 * the two sides stood in each round's order.
 */
export function pairedReading({ rounds }, ofMedians, measured = 'the two sides measured back to back') {
  return (
    `the median of ${rounds.length} rounds' ratios, ${measured}: ` +
    `${rounds.map((r) => r.toFixed(2)).join(', ')}; ratio of the medians ${ofMedians.toFixed(2)}`
  );
}

/**
 * The CPU seconds charged to a side: its server process, plus (for a PostgreSQL side, `pgApp` = the
 * application_name its pool connects with) the PostgreSQL backends serving it, which run outside the process.
 */
async function sideCpu(side) {
  const own = cpuSeconds(side.pid);
  if (own === undefined || !side.pgApp) return { own };
  const byPid = new Map((await backendPids(side.pgApp)).map((pid) => [pid, cpuSeconds(pid) ?? 0]));
  return { own, byPid };
}

/** CPU of the PostgreSQL backends over a run; a backend that appeared during it counts from zero. */
function dbDelta(before, after) {
  let sum = 0;
  for (const [pid, cpu] of after.byPid) sum += cpu - (before.byPid.get(pid) ?? 0);
  return sum;
}

let pgAdmin;
/** Sets the connection used to find PostgreSQL backends by application_name (bench/pg.mjs). */
export function usePgAdmin(client) {
  pgAdmin = client;
}
async function backendPids(app) {
  if (!pgAdmin) return [];
  const r = await pgAdmin.query('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [app]);
  return r.rows.map((row) => row.pid);
}

/** Every result of this run, by table title, for the JSON dump and the chart. */
export const results = {};

/**
 * Measures `sides` in `rounds` rounds (the order reversed every other round, so that a drift of the machine's load
 * falls on every side alike) after a warm-up of each, and prints the medians. The primary figure is the server's
 * CPU µs per operation; ops/s and latency are beside it. `baseline` names the side the ratios are taken against.
 * `order` is the order of measurement when it is not the order of the table: sides measured next to each other in
 * every round share the machine's state of those seconds (see `pairedRatio`). Each row keeps its rounds' CPU µs/op
 * (`cpuRounds`, in round order).
 */
export async function compare(
  title,
  sides,
  { baseline, seconds = options.seconds, rounds = options.rounds, order = sides } = {},
) {
  for (const side of order) await runAlone(side, sides, 1);
  const samples = new Map(sides.map((s) => [s, []]));
  for (let round = 0; round < rounds; round++) {
    for (const side of round % 2 ? [...order].reverse() : order) {
      const before = await sideCpu(side);
      const r = await runAlone(side, sides, seconds);
      const after = await sideCpu(side);
      const own = after.own - before.own;
      // A backend that vanished during the run is not counted (rare: pools keep their connections while busy).
      const db = side.pgApp ? dbDelta(before, after) : 0;
      samples.get(side).push({
        ...r,
        opsPerSec: r.ops / r.seconds,
        cpuUs: ((own + db) * 1e6) / r.ops,
        ownCpuUs: (own * 1e6) / r.ops,
      });
    }
  }
  const rows = sides.map((side) => {
    const s = samples.get(side);
    const pick = (k) => median(s.map((x) => x[k]));
    const cpu = s.map((x) => x.cpuUs);
    return {
      name: side.name,
      cpuUs: round1(pick('cpuUs')),
      cpuMin: round1(Math.min(...cpu)),
      cpuMax: round1(Math.max(...cpu)),
      cpuRounds: cpu.map(round1),
      ownCpuUs: side.pgApp ? round1(pick('ownCpuUs')) : undefined,
      opsPerSec: Math.round(pick('opsPerSec')),
      p50: round2(pick('p50')),
      p99: round2(pick('p99')),
      rssMiB: rssMiB(side.pid),
      ...(side.name === baseline ? { baseline: true } : {}),
    };
  });
  printTable(title, rows, baseline, { rounds, seconds });
  results[title] = rows;
  return Object.fromEntries(rows.map((r) => [r.name, r]));
}

/**
 * Runs one side with every other side's server paused (SIGSTOP), resumed once it is done. The servers of a table
 * share core 0, and one left idle after its own rounds still works there: V8's memory reducer runs full collections
 * once its load stops, and its checkpoint worker copies back what it wrote. Measured with six identical servers of
 * this service at 20 chains: p99 6.6–9.0 ms with the others paused, 6.9–14.2 without, the worst on whichever sides
 * followed others' rounds, while one server alone for 70 s stayed at 5.9–7.3 (docs/performance.md, Method).
 * `BENCH_PAUSE_OTHERS=off` measures without pausing.
 */
async function runAlone(side, sides, seconds) {
  const others =
    process.env.BENCH_PAUSE_OTHERS === 'off'
      ? []
      : [...new Set(sides.map((s) => s.pid))].filter((pid) => pid && pid !== side.pid);
  for (const pid of others) signal(pid, 'SIGSTOP');
  try {
    return await side.run(seconds);
  } finally {
    for (const pid of others) signal(pid, 'SIGCONT');
    // Resumed, a server first runs the timers that fell due while it was paused: it closes the keep-alive connections
    // that sat idle past its timeout. Let it, before the next side writes a request on one of them.
    if (others.length > 0) await new Promise((resolve) => setTimeout(resolve, RESUME_SETTLE_MS));
  }
}

const RESUME_SETTLE_MS = 200;

/** Sends `name` to `pid`, which may have exited already. */
function signal(pid, name) {
  try {
    process.kill(pid, name);
  } catch (e) {
    if (e.code !== 'ESRCH') throw e;
  }
}

const round2 = (x) => (x === undefined ? undefined : Math.round(x * 100) / 100);
const round1 = (x) => (x === undefined || !Number.isFinite(x) ? undefined : Math.round(x * 10) / 10);

export function printTable(title, rows, baselineName, { rounds, seconds }) {
  const base = rows.find((r) => r.name === baselineName);
  const col = (v, w) => String(v ?? '-').padStart(w);
  console.log(`\n${title} — medians of ${rounds} rounds × ${seconds} s`);
  console.log(
    `${'side'.padEnd(66)}${col('CPU µs/op', 10)}${col('(min–max)', 16)}${col('÷ base', 8)}${col('ops/s', 8)}${col('p50 ms', 8)}${col('p99 ms', 8)}${col('RSS MiB', 8)}`,
  );
  for (const r of rows) {
    const ratio = base && r !== base ? (r.cpuUs / base.cpuUs).toFixed(2) : '';
    const spread = `${r.cpuMin}–${r.cpuMax}`;
    console.log(
      `${r.name.padEnd(66)}${col(r.cpuUs, 10)}${col(spread, 16)}${col(ratio, 8)}${col(r.opsPerSec, 8)}${col(r.p50, 8)}${col(r.p99, 8)}${col(r.rssMiB, 8)}`,
    );
  }
  if (rows.some((r) => r.ownCpuUs !== undefined))
    console.log('  (PostgreSQL sides: CPU of the server process plus its PostgreSQL backends)');
}

/** Every target line of this run, for the JSON dump. */
export const verdicts = [];

/** Prints and records a target line: `verdict(label, value, ok, target)`. */
export function verdict(label, value, ok, target) {
  verdicts.push({ label, value, ok, target });
  console.log(`  ${label}: ${value} — ${ok ? 'meets' : 'MISSES'} the target (${target})`);
}

/**
 * A ratio as a target line prints it: two decimals, or as many more as it takes not to round it onto the bound itself
 * (1.998 printed "2.00×" beside "MISSES the target (≥ 2×)").
 */
export function times(ratio, bound) {
  let digits = 2;
  while (ratio !== bound && Number(ratio.toFixed(digits)) === bound && digits < 6) digits++;
  return `${ratio.toFixed(digits)}×`;
}

/** Prints and records a finding that has no target. */
export function note(text) {
  verdicts.push({ label: text });
  console.log(`  ${text}`);
}

/**
 * The MCP tool calls whose targets are absolute (µs per call, p99 in ms), read against this run's bare `node:http`:
 * the baseline of the REST table, which receives `/me`'s request. Those targets were set on one machine, and a machine
 * whose every HTTP exchange costs five times as much (docs/performance.md, "Reading the targets") misses them with the
 * service's own cost unchanged. The tables run minutes apart, so these are ratios of medians, not paired. Undefined
 * when the REST table or the MCP tables did not run.
 */
export function machineRelativeNote(tables) {
  const rest = Object.entries(tables).find(([title]) => title.startsWith('REST API'))?.[1];
  const bare = rest?.find((r) => r.baseline);
  const calls = Object.entries(tables)
    .filter(([title]) => title.includes('MCP server'))
    .flatMap(([, rows]) => rows.filter((r) => /tools\/call (get_me|list_clients|create_task)/.test(r.name)));
  if (!bare || calls.length === 0) return undefined;
  const each = calls.map((r) => `${r.name} ${(r.cpuUs / bare.cpuUs).toFixed(2)}×`).join(', ');
  return (
    `against this run's bare node:http (${bare.cpuUs} CPU µs per request on /me's request): ${each} ` +
    '(ratios of medians of tables measured minutes apart)'
  );
}

export const pinned = hasTaskset;

/** The 2026-07-28 revision: per-request `_meta` envelope and `Mcp-Method`/`Mcp-Name` headers. */
export const MODERN = '2026-07-28';

/** One tools/call as autocannon sends it: the 2026-07-28 envelope and headers, or a stateless 2025-11-25 POST. */
export function toolsCall(wire, tool, extraHeaders = {}, args = {}) {
  const modern = wire === MODERN;
  const params = { name: tool, arguments: args };
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
