import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { checkPassword } from '../src/domain/users.js';
import { openStore } from '../src/store/database.js';
import { freshDatabase } from './helpers/harness.js';
import { freePort, within } from './helpers/ops.js';

let db: Awaited<ReturnType<typeof freshDatabase>>;
let child: ChildProcess;
let stdout = '';
/** The served process's stdout alone: its log. */
let logOnly = '';
let exit: Promise<number | null>;

/**
 * The built CLI as a process (`bin/svc.js`, what `npx svc` and `npm start` run). One file builds `dist/` so that no
 * two test files compile into it at once.
 */

/** The environment of a CLI process on `database` (development, vitest's own BASE_URL removed), `extra` on top. */
function cliEnv(database: Record<string, string>, extra: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...database, NODE_ENV: 'development', ...extra };
  delete env['BASE_URL'];
  return env;
}

/** The service's migrations, one file each. */
const MIGRATION_COUNT = readdirSync(new URL('../src/store/migrations/', import.meta.url)).filter((f) =>
  f.endsWith('.ts'),
).length;

const EPHEMERAL_PORTS = { API_PORT: '0', MCP_PORT: '0', AGENCY_MCP_PORT: '0', AUTH_PORT: '0' };

interface Ended {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** stdout and stderr as they came. */
  out: string;
}

/** Runs `bin/svc.js ...args` to its end, with `nodeArgs` (a preload) before it. */
function runCli(args: string[], env: NodeJS.ProcessEnv, nodeArgs: string[] = []): Promise<Ended> {
  return new Promise((resolve) => {
    const cli = spawn(process.execPath, [...nodeArgs, 'bin/svc.js', ...args], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    for (const stream of [cli.stdout!, cli.stderr!]) stream.on('data', (c: Buffer) => (out += c.toString()));
    cli.on('exit', (code, signal) => resolve({ code, signal, out }));
  });
}

/** Preloads the tests write, removed with the file's other temporary files. */
const preloads = mkdtempSync(join(tmpdir(), 'svc-preloads-'));

/** `source` as a module to `--import` into a CLI process: the node arguments that load it. */
function preload(name: string, source: string): string[] {
  const path = join(preloads, name);
  writeFileSync(path, source);
  return ['--import', path];
}

/** Starts the built CLI exactly as `npm start` does, on ephemeral ports, and waits for its URL lines. */
beforeAll(async () => {
  await promisify(execFile)('node_modules/.bin/tsc', ['-p', 'tsconfig.json']);
  db = await freshDatabase();
  const env = cliEnv(db.env, { ...EPHEMERAL_PORTS, LOG_LEVEL: 'info' });
  child = spawn(process.execPath, ['bin/svc.js', 'start', '--only', 'api,auth'], {
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  exit = new Promise((resolve) => child.on('exit', resolve));
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
    logOnly += c.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  for (let i = 0; i < 200 && !/auth\s+http:\/\/\S+/.test(stdout); i++)
    await new Promise((r) => setTimeout(r, 50));
}, 90_000);
afterAll(async () => {
  if (child.exitCode === null) child.kill('SIGKILL');
  await db.drop();
  rmSync(preloads, { recursive: true, force: true });
});

const authUrl = () => new URL(/auth\s+(http:\/\/\S+)/.exec(stdout)![1]!);

it('prints the URLs and seeds the demo on an empty embedded database', () => {
  expect(stdout).toMatch(/api\s+http:\/\/127\.0\.0\.1:\d+/);
  expect(stdout).toMatch(/auth\s+http:\/\/127\.0\.0\.1:\d+/);
});

it('writes only JSON lines to stdout, its log: the banner for the terminal goes to stderr (`svc start | jq` stopped at it)', async () => {
  // The log is written asynchronously, the banner at once: the listening lines may arrive after it.
  for (let i = 0; i < 100 && (logOnly.match(/"msg":"listening"/g) ?? []).length < 2; i++)
    await new Promise((r) => setTimeout(r, 50));
  const lines = logOnly.split('\n').filter((l) => l !== '');
  expect(lines.length).toBeGreaterThan(0);
  for (const line of lines) expect(() => JSON.parse(line), line).not.toThrow();
  // What the banner says is in the log too, for machines.
  const listening = lines
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l['msg'] === 'listening');
  expect(listening.map((l) => l['surface']).sort()).toEqual(['api', 'auth']);
  // Which build answers, for whoever reads the log (the package's version).
  for (const line of listening) expect(line['version']).toMatch(/^\d+\.\d+\.\d+/);
  expect(String(listening.find((l) => l['surface'] === 'auth')!['url'])).toBe(authUrl().origin);
});

it('on SIGTERM stops accepting, finishes the requests in flight with Connection: close, then exits 0', async () => {
  const url = authUrl();
  const body = JSON.stringify({
    username: process.env['TEST_DATABASE'] === 'postgres' ? 'nobody' : 'ada',
    password: 'ada-demo-password',
  });
  /** A keep-alive connection, as a load balancer holds: what the server wrote on it, once the server closes it. */
  const held = () => {
    const socket = connect(Number(url.port), url.hostname);
    const written = new Promise<string>((resolve) => {
      let text = '';
      socket.on('data', (c) => (text += c.toString()));
      socket.on('close', () => resolve(text));
    });
    return { socket, written };
  };
  // Headers and half the body: the request is in flight when the signal arrives.
  const signIn = held();
  signIn.socket.write(
    `POST /api/sessions HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
  );
  // Headers begun, not ended: a request that reaches its route once closing has begun.
  const late = held();
  late.socket.write(`GET /.well-known/oauth-authorization-server HTTP/1.1\r\nHost: ${url.host}\r\n`);
  await new Promise((r) => setTimeout(r, 200));
  child.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));

  const refused = await new Promise<boolean>((resolve) => {
    const probe = connect(Number(url.port), url.hostname);
    probe.on('connect', () => {
      probe.destroy();
      resolve(false);
    });
    probe.on('error', () => resolve(true));
  });
  expect(refused, 'new connections are refused while draining').toBe(true);

  signIn.socket.write(body.slice(10));
  late.socket.write('\r\n');
  const [signedIn, answeredLate] = await Promise.all([signIn.written, late.written]);
  // The embedded database was seeded, so ada signs in; on PostgreSQL nothing is seeded and the answer is a clean 401.
  expect(signedIn).toMatch(
    process.env['TEST_DATABASE'] === 'postgres' ? /^HTTP\/1\.1 401/ : /^HTTP\/1\.1 201/,
  );
  // Before, the answer in flight said keep-alive: the connection stayed open, the close waited for it until
  // SHUTDOWN_TIMEOUT_SECONDS and the process exited 1; a request after it got Fastify's own 503.
  expect(signedIn).toMatch(/\r\nconnection: close\r\n/i);
  for (const part of [
    /^HTTP\/1\.1 200 /,
    /\r\nx-request-id: req_\w+\r\n/,
    /\r\nconnection: close\r\n/i,
    /"issuer"/,
  ])
    expect(answeredLate).toMatch(part);
  expect(await exit).toBe(0);
  expect(stdout).toContain('shutting down');
  expect(stdout).toContain('"msg":"stopped"');
  expect(stdout).not.toContain('shutdown timed out');
});

it('svc users create --password-stdin reads the password from standard input, newline trimmed', async () => {
  const env = cliEnv(db.env, { LOG_LEVEL: 'warn' });
  const created = await new Promise<{ code: number | null; out: string }>((resolve) => {
    const cli = spawn(
      process.execPath,
      ['bin/svc.js', 'users', 'create', '--username', 'stdin-user', '--password-stdin'],
      {
        env,
        stdio: ['pipe', 'pipe', 'pipe'],
      },
    );
    let out = '';
    cli.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    cli.on('exit', (code) => resolve({ code, out }));
    cli.stdin!.end('piped secret password\n');
  });
  expect(created.code).toBe(0);
  expect(JSON.parse(created.out)).toMatchObject({ object: 'user', username: 'stdin-user' });
  const store = openStore({
    databaseUrl: db.env['DATABASE_URL'],
    dataDir: db.env['DATA_DIR'] ?? '',
    databasePoolSize: 1,
  });
  try {
    expect((await checkPassword(store.db, 'stdin-user', 'piped secret password')).user).toBeDefined();
    expect((await checkPassword(store.db, 'stdin-user', 'piped secret password\n')).user).toBeUndefined();
  } finally {
    await store.close();
  }
});

it('a reader that leaves early (`svc clients list --all | head -1`): the command ends quietly, its exit code 0', async () => {
  const cli = spawn(process.execPath, ['bin/svc.js', 'clients', 'list', '--all'], {
    env: cliEnv(db.env, { LOG_LEVEL: 'warn' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Gone before the command has written anything: its first line meets a closed pipe (EPIPE).
  cli.stdout!.destroy();
  let err = '';
  cli.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const code = await new Promise<number | null>((resolve) => cli.on('exit', resolve));
  expect(err).toBe('');
  expect(code).toBe(0);
});

it('four `svc seed-demo` processes at once on one empty database all succeed, with one set of demo data and one key', async () => {
  // Several processes starting together on an empty database (instances behind a load balancer, the --only split)
  // migrate and seed at once; each is a separate process, as in production.
  const fresh = await freshDatabase();
  try {
    const env = cliEnv(fresh.env, { LOG_LEVEL: 'warn' });
    const results = await Promise.all([1, 2, 3, 4].map(() => runCli(['seed-demo'], env)));
    expect(
      results.map((r) => r.code),
      results.map((r) => r.out).join('\n'),
    ).toEqual([0, 0, 0, 0]);
    const store = openStore({
      databaseUrl: fresh.env['DATABASE_URL'],
      dataDir: fresh.env['DATA_DIR'] ?? '',
      databasePoolSize: 1,
    });
    try {
      const users = await store.db.selectFrom('users').select('username').orderBy('username').execute();
      expect(users.map((u) => u.username)).toEqual(['ada', 'grace', 'linus']);
      expect(await store.db.selectFrom('agencies').select('id').execute()).toHaveLength(2);
      // One signing key, not one per process: every instance signs with the same key and publishes the same JWKS.
      expect(await store.db.selectFrom('signing_keys').select('kid').execute()).toHaveLength(1);
    } finally {
      await store.close();
    }
  } finally {
    await fresh.drop();
  }
});

/** A preload that sends the process SIGTERM from inside the banner's write: it stops as soon as it is up. */
const sigtermAtBanner = () =>
  preload(
    'sigterm-at-banner.mjs',
    `import process from 'node:process';
    const write = process.stderr.write.bind(process.stderr);
    process.stderr.write = (chunk, ...rest) => {
      const written = write(chunk, ...rest);
      if (String(chunk).includes('svc is up')) process.kill(process.pid, 'SIGTERM');
      return written;
    };`,
  );

it('a SIGTERM that arrives as the URLs are printed still drains, closes and exits 0', async () => {
  // A supervisor may stop the service the moment it reads its URLs. The preload signals the process from inside the
  // banner's write, so the handlers must already be in place then: without them SIGTERM's default action ends the
  // process at once, killed by the signal, with nothing closed (a race a parent polling the output once lost in CI).
  const fresh = await freshDatabase();
  try {
    const env = cliEnv(fresh.env, { ...EPHEMERAL_PORTS, LOG_LEVEL: 'info' });
    const ended = await runCli(['start', '--only', 'api,auth'], env, sigtermAtBanner());
    expect({ code: ended.code, signal: ended.signal }, ended.out).toEqual({ code: 0, signal: null });
    expect(ended.out).toContain('svc is up');
    expect(ended.out).toContain('"msg":"stopped"');
  } finally {
    await fresh.drop();
  }
}, 60_000);

it('serves a surface named twice in --only once (the second listen met the first on its own port)', async () => {
  const fresh = await freshDatabase();
  try {
    // A port of its own (on port 0 each listen gets another, and the second went unnoticed, its server left open).
    const env = cliEnv(fresh.env, {
      ...EPHEMERAL_PORTS,
      API_PORT: String(await freePort()),
      LOG_LEVEL: 'info',
    });
    const ended = await runCli(['start', '--only', 'api, auth,api'], env, sigtermAtBanner());
    expect({ code: ended.code, signal: ended.signal }, ended.out).toEqual({ code: 0, signal: null });
    expect(ended.out.match(/^ {2}api +http:/gm), ended.out).toHaveLength(1);
  } finally {
    await fresh.drop();
  }
}, 60_000);

/** The API's and the metrics listener's URLs, read from a `svc start --only api` process's log once it has both. */
async function apiAndMetricsUrls(output: () => string): Promise<{ api: string; metricsUrl: string }> {
  const apiListening = /"surface":"api","url":"(http:[^"]+)"[^\n]*"msg":"listening"/;
  for (let i = 0; i < 200 && !(apiListening.test(output()) && output().includes('metrics listening')); i++)
    await new Promise((r) => setTimeout(r, 50));
  return {
    api: apiListening.exec(output())![1]!,
    metricsUrl: /"url":"(http:[^"]+\/metrics)","msg":"metrics listening"/.exec(output())![1]!,
  };
}

/** What `promise` settles to within `ms`, or 'still running' (a process that should have ended). */
function settledWithin<T>(promise: Promise<T>, ms: number): Promise<T | 'still running'> {
  return Promise.race([
    promise,
    new Promise<'still running'>((r) => setTimeout(() => r('still running'), ms)),
  ]);
}

it('a log collector that stops reading stdout: serving goes on in bounded memory, the loss is reported, SIGTERM ends it', async () => {
  // What a hung logging driver or a `| tee` onto a full disk does: stdout's pipe fills and stays full. pino's default
  // destination kept every later line in memory and, at exit, retried the write for ever: no SIGTERM ended it.
  const fresh = await freshDatabase();
  const cli = spawn(process.execPath, ['bin/svc.js', 'start', '--only', 'api'], {
    env: cliEnv(fresh.env, {
      ...EPHEMERAL_PORTS,
      LOG_LEVEL: 'info',
      LOG_BUFFER_BYTES: '65536',
      METRICS_PORT: '0',
    }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => cli.on('exit', resolve));
  let out = '';
  const collect = (c: Buffer) => (out += c.toString());
  cli.stdout!.on('data', collect);
  try {
    const { api, metricsUrl } = await apiAndMetricsUrls(() => out);
    expect(await droppedLogLines(metricsUrl)).toBe(0);
    // The collector stops: nothing reads the pipe any more.
    const stall = () => {
      cli.stdout!.off('data', collect);
      cli.stdout!.pause();
    };
    stall();
    // Each logged by the access log (~250 bytes).
    await requestsNotFound(api, 3000);
    // It reads again: the held lines arrive, then one line says how many were dropped.
    cli.stdout!.on('data', collect);
    cli.stdout!.resume();
    const report = async () => {
      for (let i = 0; i < 100; i++) {
        const line = out.split('\n').find((l) => l.includes('"msg":"log output stalled: lines dropped"'));
        if (line) return JSON.parse(line) as { dropped_lines: number; buffer_bytes: number };
        await fetch(`${api}/health`);
        await new Promise((r) => setTimeout(r, 100));
      }
      return undefined;
    };
    const reported = await report();
    expect(reported, out.slice(-2000)).toMatchObject({ level: 40, buffer_bytes: 65536 });
    expect(reported!.dropped_lines).toBeGreaterThan(0);
    // The same count for alerting (a scrape never waited on stdout).
    expect(await droppedLogLines(metricsUrl)).toBeGreaterThanOrEqual(reported!.dropped_lines);
    const logged = out.split('\n').filter((l) => l.includes('/no-route-')).length;
    expect(logged).toBeLessThan(3000);

    // Stalled again, a SIGTERM ends the process: the held lines get a bounded wait, not for ever.
    stall();
    await requestsNotFound(api, 1000);
    cli.kill('SIGTERM');
    expect(await settledWithin(exited, 15_000)).toBe(0);
  } finally {
    if (cli.exitCode === null && cli.signalCode === null) cli.kill('SIGKILL');
    await fresh.drop();
  }
}, 90_000);

/** The count of lines the log dropped, read from the metrics listener at `metricsUrl`. */
async function droppedLogLines(metricsUrl: string): Promise<number> {
  return Number(/^svc_log_lines_dropped_total (\d+)$/m.exec(await (await fetch(metricsUrl)).text())?.[1]);
}

/** `count` requests for a route that is not there, ten at a time, each answered 404 and logged by the access log. */
async function requestsNotFound(api: string, count: number): Promise<void> {
  for (let i = 0; i < count; i += 10) {
    const statuses = await Promise.all(
      Array.from({ length: 10 }, (_, j) => fetch(`${api}/no-route-${i + j}`).then((r) => r.status)),
    );
    expect(new Set(statuses)).toEqual(new Set([404]));
  }
}

/** The lines of `text` that say the log output failed, parsed. */
const outputFailures = (text: string) =>
  text
    .split('\n')
    .filter((l) => l.includes('"msg":"log output failed'))
    .map((l) => JSON.parse(l) as { level: number; code: string });

it('a log collector that goes away (EPIPE): serving goes on, the lost lines are counted, stderr says so once', async () => {
  // The collector's end of the pipe closes (it crashed; a `| head` ended). pino's destination silenced EPIPE: every
  // later line was lost and the count of dropped lines stayed 0.
  const fresh = await freshDatabase();
  const cli = spawn(process.execPath, ['bin/svc.js', 'start', '--only', 'api'], {
    env: cliEnv(fresh.env, { ...EPHEMERAL_PORTS, LOG_LEVEL: 'info', METRICS_PORT: '0' }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise<number | null>((resolve) => cli.on('exit', resolve));
  let out = '';
  let err = '';
  cli.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  cli.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  try {
    const { api, metricsUrl } = await apiAndMetricsUrls(() => out);
    cli.stdout!.destroy();
    await requestsNotFound(api, 200);
    // The first write into the closed pipe fails; the lines it carried and any queued behind it (a line or two here,
    // up to a batch of requests' lines) are lost uncounted; every line after is counted. The previous code counted 0.
    expect(await droppedLogLines(metricsUrl)).toBeGreaterThanOrEqual(150);
    expect(outputFailures(err), err).toEqual([expect.objectContaining({ level: 50, code: 'EPIPE' })]);
    cli.kill('SIGTERM');
    expect(await exited).toBe(0);
  } finally {
    if (cli.exitCode === null && cli.signalCode === null) cli.kill('SIGKILL');
    await fresh.drop();
  }
}, 90_000);

it('stdout gone just as the process exits, before any write has failed: it exits at once, the lines lost', async () => {
  // A terminal closed with SIGHUP, a collector that dies as the process stops: the last lines are logged and the process
  // exits within a turn, so the first line's failed write has not come back when the exit flush writes the others. The
  // exit flush of pino's destination (sonic-boom 4) met that error by trying again every 100 ms for ever: the process
  // never ended (seen by hand 4 times in 14 with a pseudo-terminal hung up under `svc start`).
  const logOutput = new URL('../dist/http/log-output.js', import.meta.url).href;
  const exits = spawn(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      `import { boundedLogger } from ${JSON.stringify(logOutput)};
      import { systemClock } from ${JSON.stringify(new URL('../dist/base/clock.js', import.meta.url).href)};
      process.stdin.once('data', () => {
        const log = boundedLogger({ base: { service: 'svc' } }, 65536, systemClock);
        log.info('the first line, its write in flight');
        log.info('the second line, for the exit flush');
        process.exit(0);
      });`,
    ],
    { stdio: ['pipe', 'pipe', 'pipe'] },
  );
  const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    exits.on('exit', (code, signal) => resolve({ code, signal })),
  );
  try {
    exits.stdout!.destroy();
    exits.stdin!.write('go\n');
    expect(await settledWithin(ended, 10_000)).toEqual({ code: 0, signal: null });
  } finally {
    if (exits.exitCode === null && exits.signalCode === null) exits.kill('SIGKILL');
  }
});

it('stdout on a full disk (ENOSPC): the process serves and counts the lost lines, and SIGHUP drains and exits 0', async () => {
  // Before, any failed write but EPIPE was an uncaught error (the banner's through process.stdout, the log's through its
  // destination): the process ended as it started. SIGHUP (the terminal closed, a supervisor's "reload") ended it at
  // once, dropping the requests in flight, by the signal's default action.
  const ports = { API_PORT: await freePort(), METRICS_PORT: await freePort() };
  const fresh = await freshDatabase();
  const full = openSync('/dev/full', 'w');
  const cli = spawn(process.execPath, ['bin/svc.js', 'start', '--only', 'api'], {
    env: cliEnv(fresh.env, {
      LOG_LEVEL: 'info',
      API_PORT: `${ports.API_PORT}`,
      METRICS_PORT: `${ports.METRICS_PORT}`,
    }),
    stdio: ['ignore', full, 'pipe'],
  });
  closeSync(full);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    cli.on('exit', (code, signal) => resolve({ code, signal })),
  );
  let err = '';
  cli.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  const api = `http://127.0.0.1:${ports.API_PORT}`;
  try {
    const up = await within(
      () =>
        fetch(`${api}/health`).then(
          (r) => r.ok,
          () => false,
        ),
      10_000,
    );
    expect(up, err).toBeGreaterThanOrEqual(0);
    await requestsNotFound(api, 100);
    expect(await droppedLogLines(`http://127.0.0.1:${ports.METRICS_PORT}/metrics`)).toBeGreaterThanOrEqual(
      100,
    );
    expect(outputFailures(err), err).toEqual([expect.objectContaining({ level: 50, code: 'ENOSPC' })]);
    cli.kill('SIGHUP');
    expect(await exited, err).toEqual({ code: 0, signal: null });
  } finally {
    if (cli.exitCode === null && cli.signalCode === null) cli.kill('SIGKILL');
    await fresh.drop();
  }
}, 90_000);

it('a migration killed partway leaves nothing half-made: the next `svc migrate` applies every migration', async () => {
  // On the run's engine. The preload kills the process (SIGKILL: nothing runs after it) as the third of the service's
  // tables is about to be made, through whichever driver it uses. SQLite's migrations ran statement by statement until
  // database.ts told Kysely that SQLite's DDL is transactional; PostgreSQL's ran in one transaction already.
  const project = fileURLToPath(new URL('../package.json', import.meta.url));
  const killMidMigration = preload(
    'kill-mid-migration.mjs',
    `import { createRequire } from 'node:module';
    import process from 'node:process';
    const require = createRequire(${JSON.stringify(project)});
    let made = 0;
    const killAtThirdTable = (text) => {
      if (/^create table "(?!kysely_)/i.test(text) && ++made === 3) process.kill(process.pid, 'SIGKILL');
    };
    const Database = require('better-sqlite3');
    const prepare = Database.prototype.prepare;
    Database.prototype.prepare = function (source, ...rest) {
      killAtThirdTable(source);
      return prepare.call(this, source, ...rest);
    };
    const { Client } = require('pg');
    const query = Client.prototype.query;
    Client.prototype.query = function (config, ...rest) {
      killAtThirdTable(typeof config === 'string' ? config : (config?.text ?? ''));
      return query.call(this, config, ...rest);
    };`,
  );
  const fresh = await freshDatabase();
  const migrate = (nodeArgs: string[] = []) =>
    runCli(['migrate'], cliEnv(fresh.env, { LOG_LEVEL: 'warn' }), nodeArgs);
  try {
    const killed = await migrate(killMidMigration);
    expect(killed.signal, killed.out).toBe('SIGKILL');
    const again = await migrate();
    expect(again.code, again.out).toBe(0);
    expect(again.out.match(/^applied /gm), again.out).toHaveLength(MIGRATION_COUNT);
    expect((await migrate()).out.trim()).toBe('up to date');
  } finally {
    await fresh.drop();
  }
}, 60_000);
