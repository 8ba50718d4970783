// Cost as data grows, each step against the empty database in the same run, on the embedded database and (when
// reachable) PostgreSQL:
// - the refresh rotation (BENCH_CHAINS concurrent chains) with 0, 1%, 10% and 100% of BENCH_GROWTH_ROWS (1M) rows in
//   refresh_tokens, a tenth as many connections, and as many audit_events rows (target ≤ 1.2× the empty database,
//   judged by the median of the rounds' ratios of the largest step to the empty one, measured back to back, over
//   BENCH_GROWTH_ROUNDS rounds);
// - the agency's History page (its audit events in sentences), for the agency holding those events (target ≤ 50 ms);
// - GET /me with 1, 1,000 and BENCH_DISTINCT_TOKENS (100k) distinct live session tokens in rotation, more than
//   TOKEN_CACHE_SIZE: the cost of a verified-token cache miss (embedded database);
// - storage growth per rotation (rows of refresh_tokens; bytes of the SQLite file in use, or of refresh_tokens with its
//   dead rows on PostgreSQL).
// The bulk rows are inserted with SQL straight into each server's database while it runs (SQLite's WAL lets the
// bench write beside the server; PostgreSQL tables are then ANALYZEd, as autovacuum would), then every step is
// measured in alternating rounds. BENCH_GROWTH_ENGINES (default sqlite,postgres) picks the engines.
import { createPrivateKey, sign } from 'node:crypto';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import {
  compare,
  httpSide,
  note,
  options,
  pairedRatio,
  pairedReading,
  percentiles,
  sessionToken,
  startSvc,
  times,
  verdict,
} from './lib.mjs';
import { pageClient } from './oauth-flow.mjs';
import { pgEnd, pgReady, pgSchema } from './pg.mjs';
import { AGENCY_RESOURCE, ourChains, rotationSide } from './refresh.mjs';

const SVC_ENV = {
  AGENCY_MCP_URL: 'http://127.0.0.1:4102',
  DCR_LIMIT_PER_IP: '100000',
  SIGNIN_LIMIT_PER_IP: '100000',
};
const DAY = 24 * 3600_000;
const ENGINES = { sqlite: 'embedded database', postgres: 'PostgreSQL' };
const label = (n) => n.toLocaleString('en-US');

/** The demo ids the bulk rows hang on: another user's connections, the audit events of the measured agency. */
const DEMO_IDS = {
  user: "SELECT id FROM users WHERE username = 'linus'",
  agency: "SELECT id FROM agencies WHERE name = 'Northwind Studio'",
  members: 'SELECT id FROM members WHERE agency_id = $1 ORDER BY id',
};

/** Row sources and random hex strings in each engine's SQL. */
const SQLITE = {
  counter: (n) =>
    `(WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ${Number(n)}) SELECT n FROM seq)`,
  hex: (bytes) => `lower(hex(randomblob(${bytes})))`,
};
const POSTGRES = {
  counter: (n) => `generate_series(1, ${Number(n)}) AS s(n)`,
  hex: (bytes) => `substr(md5(random()::text) || md5(random()::text), 1, ${bytes * 2})`,
};

/**
 * The bulk inserts for `rows`: refresh tokens (nine in ten rotated, as chains issued before token families, migration
 * 0005, leave them) over rows/10 connections of another user, and `rows` audit events of the agency whose History page
 * is measured, spread over its members.
 */
function bulkStatements(rows, { counter, hex }, ids) {
  const now = Date.now();
  const connections = Math.max(1, Math.floor(rows / 10));
  const memberCase = ids.members.map((id, i) => `WHEN ${i} THEN '${id}'`).join(' ');
  return [
    [
      `INSERT INTO connections (id, user_id, client_id, resource, scopes, ceiling, status, created_at, last_used_at,
         expires_at)
       SELECT 'con_bulk' || n, $1, 'bulk-client-' || n, $2, 'agency:mcp:read offline_access', '[]',
         'active', CAST($3 AS bigint), CAST($3 AS bigint), CAST($4 AS bigint) FROM ${counter(connections)}`,
      [ids.user, AGENCY_RESOURCE, now, now + 30 * DAY],
    ],
    [
      `INSERT INTO refresh_tokens (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at,
         expires_at)
       SELECT ${hex(32)}, 'con_bulk' || (n % ${connections} + 1), ${hex(32)}, ${hex(16)},
         'agency:mcp:read offline_access', CAST($1 AS bigint), CASE WHEN n % 10 = 0 THEN NULL ELSE CAST($1 AS bigint) END,
         CAST($2 AS bigint) FROM ${counter(rows)}`,
      [now - DAY, now + 29 * DAY],
    ],
    [
      `INSERT INTO audit_events (id, type, agency_id, actor_user_id, member_id, connection_id, detail, created_at)
       SELECT 'evt_bulk' || n, 'connection.created', $1, $2, CASE n % ${ids.members.length} ${memberCase} END,
         'con_bulk' || (n % ${connections} + 1), '{"client_name":"bulk client","scope":"agency:mcp:read"}',
         CAST($3 AS bigint) - n * 1000 FROM ${counter(rows)}`,
      [ids.agency, ids.user, now],
    ],
  ];
}

/** The embedded database of a running server: bulk load (one transaction) and storage figures. */
function sqliteStore(svc) {
  const db = new SQLite(join(svc.dataDir, 'svc.sqlite'));
  db.pragma('busy_timeout = 10000');
  // PostgreSQL's $n placeholders (some used twice) become named parameters.
  const run = (text, values) =>
    db
      .prepare(text.replace(/\$(\d+)/g, '@p$1'))
      .run(Object.fromEntries(values.map((v, i) => [`p${i + 1}`, v])));
  return {
    db,
    async load(rows) {
      if (!rows) return;
      const one = (text) => db.prepare(text.replace(/\$1/g, '?')).pluck();
      const agency = one(DEMO_IDS.agency).get();
      const ids = { user: one(DEMO_IDS.user).get(), agency, members: one(DEMO_IDS.members).all(agency) };
      db.transaction(() => {
        for (const [text, values] of bulkStatements(rows, SQLITE, ids)) run(text, values);
      })();
    },
    /** Bytes in use (pages less free pages) and rows of refresh_tokens. */
    async storage() {
      db.pragma('wal_checkpoint(PASSIVE)');
      const pages = db.pragma('page_count', { simple: true }) - db.pragma('freelist_count', { simple: true });
      return {
        bytes: pages * db.pragma('page_size', { simple: true }),
        rows: db.prepare('SELECT count(*) FROM refresh_tokens').pluck().get(),
      };
    },
    close: async () => db.close(),
  };
}

/** A PostgreSQL schema of a running server, through its own connection (not counted as the server's backend). */
async function postgresStore(schema) {
  const url = new URL(schema.url);
  url.searchParams.set('application_name', 'svc-bench-loader');
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const rowsOf = async (text, values) => (await client.query(text, values)).rows;
  return {
    async load(rows) {
      if (!rows) return;
      const [{ id: agency }] = await rowsOf(DEMO_IDS.agency);
      const ids = {
        user: (await rowsOf(DEMO_IDS.user))[0].id,
        agency,
        members: (await rowsOf(DEMO_IDS.members, [agency])).map((r) => r.id),
      };
      await client.query('BEGIN');
      for (const [text, values] of bulkStatements(rows, POSTGRES, ids)) await client.query(text, values);
      await client.query('COMMIT');
      await client.query('ANALYZE connections, refresh_tokens, audit_events');
    },
    /** Bytes of refresh_tokens with its indexes, and its rows. */
    async storage() {
      const [r] = await rowsOf(
        "SELECT pg_total_relation_size('refresh_tokens') AS bytes, (SELECT count(*) FROM refresh_tokens) AS rows",
      );
      return { bytes: Number(r.bytes), rows: Number(r.rows) };
    },
    close: () => client.end(),
  };
}

/** The browser session cookie of a user, through the sign-in page. */
async function dashboardCookie(auth, username) {
  const browser = pageClient(auth);
  await browser.req('/sign-in');
  const res = await browser.form('/sign-in', {
    csrf: browser.csrf(),
    username,
    password: `${username}-demo-password`,
    next: '/dashboard',
  });
  if (res.status !== 303) throw new Error(`dashboard sign-in answered ${res.status}`);
  return browser.cookieHeader();
}

/**
 * One browser loading a page again and again (one request at a time), timed here to the microsecond: autocannon
 * reports whole milliseconds, too coarse for a page answered in well under one.
 */
function pageSide(name, { url, pid, pgApp, cookie }) {
  return {
    name,
    pid,
    pgApp,
    async run(seconds) {
      const latencies = [];
      const until = performance.now() + seconds * 1000;
      const start = performance.now();
      while (performance.now() < until) {
        const t0 = performance.now();
        const res = await fetch(url, { headers: { cookie }, redirect: 'manual' });
        const body = await res.text();
        if (res.status !== 200 || !body.includes('<h1>History of'))
          throw new Error(`${name}: answered ${res.status}`);
        latencies.push(performance.now() - t0);
      }
      return {
        ops: latencies.length,
        seconds: (performance.now() - start) / 1000,
        ...percentiles(latencies),
      };
    },
  };
}

/** The History page of an agency, found as a member finds it: from Connected apps, under the agency's heading. */
async function historyUrl(auth, cookie, agencyName) {
  const page = await (await fetch(`${auth}/dashboard`, { headers: { cookie } })).text();
  const agency = new RegExp(`<h2 id="apps-(agy_[A-Za-z0-9]+)">${agencyName}</h2>`).exec(page)?.[1];
  if (!agency) throw new Error(`no agency ${agencyName} on the Connected apps page`);
  return `${auth}/dashboard/agencies/${agency}/history`;
}

/**
 * One server per engine and data size, with its chains, bulk rows and a dashboard cookie of the agency's owner.
 * On PostgreSQL the side carries the schema's application_name, so its backends' CPU is charged to it.
 */
async function growthStep(engine, rows, stops) {
  let env = SVC_ENV;
  let pgApp;
  let schema;
  if (engine === 'postgres') {
    schema = await pgSchema();
    stops.push(() => schema.drop());
    env = { ...SVC_ENV, DATABASE_URL: schema.url };
    pgApp = schema.app;
  }
  const svc = await startSvc({ only: 'auth', env });
  stops.push(() => svc.stop());
  const chains = await ourChains(svc.urls.auth, options.chains);
  const store = engine === 'postgres' ? await postgresStore(schema) : sqliteStore(svc);
  stops.push(() => store.close());
  const t0 = performance.now();
  await store.load(rows);
  const loadSeconds = (performance.now() - t0) / 1000;
  if (rows)
    console.log(
      `  ${ENGINES[engine]}: bulk-loaded ${label(rows)} rows per table in ${loadSeconds.toFixed(1)} s`,
    );
  const cookie = await dashboardCookie(svc.urls.auth, 'ada');
  const history = await historyUrl(svc.urls.auth, cookie, 'Northwind Studio');
  return {
    rows,
    store,
    rotation: rotationSide(`refresh rotation, ${label(rows)} refresh_tokens rows`, {
      pid: svc.pid,
      pgApp,
      tokenUrl: svc.urls.auth,
      chains,
    }),
    audit: pageSide(`the agency's history page, ${label(rows)} audit_events rows`, {
      url: history,
      pid: svc.pid,
      pgApp,
      cookie,
    }),
  };
}

/** `count` session tokens of `count` live sessions, signed like the service's own (same header, claims and key). */
async function mintSessionTokens(svc, db, count) {
  const template = await sessionToken(svc.urls.auth, 'ada');
  const [h, p] = template.split('.');
  const header = JSON.parse(Buffer.from(h, 'base64url'));
  const payload = JSON.parse(Buffer.from(p, 'base64url'));
  const key = db.prepare('SELECT private_jwk FROM signing_keys WHERE kid = ?').pluck().get(header.kid);
  const privateKey = createPrivateKey({ key: JSON.parse(key), format: 'jwk' });
  const { user_id: userId, expires_at: expiresAt } = db
    .prepare('SELECT user_id, expires_at FROM sessions WHERE id = ?')
    .get(payload.sid);
  db.prepare(
    `INSERT INTO sessions (id, user_id, created_at, expires_at) SELECT 'ses_bulk' || n, ?, ?, ? FROM ${SQLITE.counter(count)}`,
  ).run(userId, Date.now(), expiresAt);
  const h64 = Buffer.from(JSON.stringify(header)).toString('base64url');
  const signOne = (n) => {
    const body = { ...payload, sid: `ses_bulk${n}`, jti: `bench${n}` };
    const input = `${h64}.${Buffer.from(JSON.stringify(body)).toString('base64url')}`;
    const dsa = header.alg === 'ES256' ? { dsaEncoding: 'ieee-p1363' } : {};
    return new Promise((resolve, reject) =>
      sign('sha256', Buffer.from(input), { key: privateKey, ...dsa }, (err, sig) =>
        err ? reject(err) : resolve(`${input}.${sig.toString('base64url')}`),
      ),
    );
  };
  const tokens = [];
  for (let n = 1; n <= count; n += 256) {
    const batch = [];
    for (let i = n; i < Math.min(count + 1, n + 256); i++) batch.push(signOne(i));
    tokens.push(...(await Promise.all(batch)));
  }
  return tokens;
}

/** GET /me presenting `tokens` in turn, one per request. */
function meSide(name, svc, tokens) {
  let next = 0;
  return httpSide(name, {
    url: `${svc.urls.api}/me`,
    pid: svc.pid,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => ({
          ...req,
          headers: { ...req.headers, authorization: `Bearer ${tokens[next++ % tokens.length]}` },
        }),
      },
    ],
  });
}

async function distinctTokens(stops) {
  const svc = await startSvc({ only: 'api,auth' });
  stops.push(() => svc.stop());
  const { db } = sqliteStore(svc);
  stops.push(() => db.close());
  const t0 = performance.now();
  const tokens = await mintSessionTokens(svc, db, options.distinctTokens);
  console.log(
    `  minted ${tokens.length} session tokens in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  const steps = [...new Set([1, 1000, options.distinctTokens])].filter((n) => n <= options.distinctTokens);
  const sides = steps.map((n) =>
    meSide(`GET /me, ${n.toLocaleString('en-US')} distinct session tokens`, svc, tokens.slice(0, n)),
  );
  return {
    steps,
    table: await compare('GET /me by distinct live session tokens (TOKEN_CACHE_SIZE 10,000)', sides, {
      baseline: sides[0].name,
    }),
  };
}

export async function run() {
  const stops = [];
  try {
    const wanted = (process.env.BENCH_GROWTH_ENGINES ?? 'sqlite,postgres').split(',');
    const engines = [];
    if (wanted.includes('sqlite')) engines.push('sqlite');
    if (wanted.includes('postgres') && (await pgReady())) engines.push('postgres');
    const sizes = [0, options.growthRows / 100, options.growthRows / 10, options.growthRows].map(Math.floor);
    const out = { series: [] };
    for (const engine of engines) {
      const steps = [];
      for (const rows of sizes) steps.push(await growthStep(engine, rows, stops));
      out.series.push(...(await measureEngine(engine, steps)));
    }
    const me = await distinctTokens(stops);
    out.series.push(meFindings(me));
    return out;
  } finally {
    for (const stop of stops.reverse()) await stop();
    await pgEnd();
  }
}

/** The rotation and History page tables of one engine, its targets and its storage per rotation; returns its chart series. */
async function measureEngine(engine, steps) {
  const name = ENGINES[engine];
  const [empty, ...grown] = steps;
  const biggest = steps.at(-1);
  const before = await empty.store.storage();
  // The largest step is measured right after the empty one (right before it in the reversed rounds), and its verdict
  // is the median of their ratios round by round: see pairedRatio in lib.mjs.
  const rotations = await compare(
    `Refresh rotation (${options.chains} concurrent chains) by rows in refresh_tokens, ${name}`,
    steps.map((s) => s.rotation),
    {
      baseline: empty.rotation.name,
      rounds: options.growthRounds,
      order: [empty, biggest, ...grown.slice(0, -1)].map((s) => s.rotation),
    },
  );
  const after = await empty.store.storage();
  const audit = await compare(
    `History page (agency-wide audit events) by rows in audit_events, one request at a time, ${name}`,
    steps.map((s) => s.audit),
    { baseline: empty.audit.name },
  );
  const rot = pairedRatio(rotations[empty.rotation.name], rotations[biggest.rotation.name]);
  verdict(
    `${name}: refresh rotation at ${label(biggest.rows)} rows ÷ empty`,
    `${times(rot.ratio, 1.2)} (${pairedReading(rot, rotations[biggest.rotation.name].cpuUs / rotations[empty.rotation.name].cpuUs)})`,
    rot.ratio <= 1.2,
    '≤ 1.2×',
  );
  const page = audit[biggest.audit.name];
  verdict(
    `${name}: history page with ${label(biggest.rows)} audit events`,
    `p99 ${page.p99} ms (p50 ${page.p50} ms, one request at a time)`,
    page.p99 <= 50,
    'p99 ≤ 50 ms',
  );
  const count = empty.rotation.total;
  const perRotation = {
    rows: (after.rows - before.rows) / count,
    bytes: (after.bytes - before.bytes) / count,
  };
  // Each rotation deletes the row its family no longer needs, so a chain keeps two rows however long it lives.
  verdict(
    `${name}: storage per rotation`,
    `${perRotation.rows.toFixed(3)} refresh_tokens rows, ${perRotation.bytes.toFixed(0)} bytes (${count} rotations ` +
      `on the empty database; bytes: SQLite's pages in use, PostgreSQL's relation with its dead rows, which ` +
      `autovacuum reclaims)`,
    perRotation.rows < 0.01,
    '< 0.01 rows kept per rotation',
  );
  const short = engine === 'postgres' ? 'PostgreSQL' : 'SQLite';
  return [
    {
      name: `refresh rotation, ${short}`,
      points: steps.map((s) => [s.rows, rotations[s.rotation.name].cpuUs]),
    },
    { name: `History page, ${short}`, points: steps.map((s) => [s.rows, audit[s.audit.name].cpuUs]) },
  ];
}

function meFindings(me) {
  const at = (n) => me.table[`GET /me, ${label(n)} distinct session tokens`];
  const [one, many] = [at(me.steps[0]), at(me.steps.at(-1))];
  note(
    `a verified-token cache miss costs ${(many.cpuUs - one.cpuUs).toFixed(0)} CPU µs per request ` +
      `(/me ${one.cpuUs} µs hit, ${many.cpuUs} µs miss)`,
  );
  return { name: 'GET /me by distinct tokens', points: me.steps.map((n) => [n, at(n).cpuUs]) };
}
