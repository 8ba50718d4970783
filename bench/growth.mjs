// Cost as data grows, each step against the empty database in the same run (embedded database):
// - the refresh rotation (BENCH_CHAINS concurrent chains) with 0, 1%, 10% and 100% of BENCH_GROWTH_ROWS (1M) rows in
//   refresh_tokens, a tenth as many connections, and as many audit_events rows (target ≤ 1.2× the empty database);
// - the dashboard page with its audit section, for the agency holding those audit events (target ≤ 50 ms);
// - GET /me with 1, 1,000 and BENCH_DISTINCT_TOKENS (100k) distinct live session tokens in rotation, more than
//   TOKEN_CACHE_SIZE: the cost of a verified-token cache miss;
// - storage growth per rotation (rows and bytes of the embedded database).
// The bulk rows are inserted with SQL straight into each server's database file (WAL lets the bench write while
// the server runs), then every step is measured in alternating rounds.
import { createPrivateKey, sign } from 'node:crypto';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { compare, httpSide, note, options, percentiles, sessionToken, startSvc, verdict } from './lib.mjs';
import { pageClient } from './oauth-flow.mjs';
import { AGENCY_RESOURCE, ourChains, rotationSide } from './refresh.mjs';

const SVC_ENV = {
  AGENCY_MCP_URL: 'http://127.0.0.1:4102',
  DCR_LIMIT_PER_IP: '100000',
  SIGNIN_LIMIT_PER_IP: '100000',
};
const DAY = 24 * 3600_000;

const openDb = (svc) => {
  const db = new SQLite(join(svc.dataDir, 'svc.sqlite'));
  db.pragma('busy_timeout = 10000');
  return db;
};

/** A recursive CTE counting 1..n, the source of every bulk insert. */
const seq = (n) =>
  `WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < ${Number(n)})`;

/**
 * `rows` refresh tokens (nine in ten rotated, as a long-lived chain leaves them) over rows/10 connections of another
 * user, and `rows` audit events of the agency whose dashboard is measured, spread over its members.
 */
function bulkLoad(db, rows) {
  if (!rows) return;
  const now = Date.now();
  const userId = db.prepare("SELECT id FROM users WHERE username = 'linus'").pluck().get();
  const agency = db.prepare("SELECT id FROM agencies WHERE name = 'Northwind Studio'").pluck().get();
  const members = db.prepare('SELECT id FROM members WHERE agency_id = ? ORDER BY id').pluck().all(agency);
  const connections = Math.max(1, Math.floor(rows / 10));
  db.transaction(() => {
    db.prepare(
      `${seq(connections)} INSERT INTO connections (id, user_id, client_id, resource, scopes, ceiling, status,
         created_at, last_used_at, expires_at)
       SELECT 'con_bulk' || n, ?, 'bulk-client-' || (n % 1000), ?, 'agency:mcp:read offline_access', '[]', 'active',
         ?, ?, ? FROM seq`,
    ).run(userId, AGENCY_RESOURCE, now, now, now + 30 * DAY);
    db.prepare(
      `${seq(rows)} INSERT INTO refresh_tokens (hash, connection_id, parent_hash, successor_salt, scope, issued_at,
         rotated_at, expires_at)
       SELECT lower(hex(randomblob(32))), 'con_bulk' || (n % ${connections} + 1), lower(hex(randomblob(32))),
         lower(hex(randomblob(16))), 'agency:mcp:read offline_access', ?, CASE WHEN n % 10 = 0 THEN NULL ELSE ? END,
         ? FROM seq`,
    ).run(now - DAY, now - DAY, now + 29 * DAY);
    const memberCase = members.map((id, i) => `WHEN ${i} THEN '${id}'`).join(' ');
    db.prepare(
      `${seq(rows)} INSERT INTO audit_events (id, type, agency_id, actor_user_id, member_id, connection_id, detail,
         created_at)
       SELECT 'evt_bulk' || n, 'connection.created', ?, ?, CASE n % ${members.length} ${memberCase} END,
         'con_bulk' || (n % ${connections} + 1), '{"client_name":"bulk client","scope":"agency:mcp:read"}',
         ? - n * 1000 FROM seq`,
    ).run(agency, userId, now);
  })();
}

/** Bytes the database uses (pages in use, free pages excluded) and its refresh_tokens rows. */
function storage(db) {
  db.pragma('wal_checkpoint(PASSIVE)');
  const pages = db.pragma('page_count', { simple: true }) - db.pragma('freelist_count', { simple: true });
  return {
    bytes: pages * db.pragma('page_size', { simple: true }),
    rows: db.prepare('SELECT count(*) FROM refresh_tokens').pluck().get(),
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
function pageSide(name, { url, pid, cookie }) {
  return {
    name,
    pid,
    async run(seconds) {
      const latencies = [];
      const until = performance.now() + seconds * 1000;
      const start = performance.now();
      while (performance.now() < until) {
        const t0 = performance.now();
        const res = await fetch(url, { headers: { cookie }, redirect: 'manual' });
        const body = await res.text();
        if (res.status !== 200 || !body.includes('id="audit"'))
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

/** One server per data size, with its chains, bulk rows and a dashboard cookie of the agency's owner. */
async function growthStep(rows, stops) {
  const svc = await startSvc({ only: 'auth', env: SVC_ENV });
  stops.push(() => svc.stop());
  const chains = await ourChains(svc.urls.auth, options.chains);
  const db = openDb(svc);
  stops.push(() => db.close());
  const t0 = performance.now();
  bulkLoad(db, rows);
  const loadSeconds = (performance.now() - t0) / 1000;
  const cookie = await dashboardCookie(svc.urls.auth, 'ada');
  const label = rows.toLocaleString('en-US');
  return {
    rows,
    loadSeconds,
    db,
    rotation: rotationSide(`refresh rotation, ${label} refresh_tokens rows`, {
      pid: svc.pid,
      tokenUrl: svc.urls.auth,
      chains,
    }),
    audit: pageSide(`dashboard with its audit section, ${label} audit_events rows`, {
      url: `${svc.urls.auth}/dashboard`,
      pid: svc.pid,
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
    `${seq(count)} INSERT INTO sessions (id, user_id, created_at, expires_at) SELECT 'ses_bulk' || n, ?, ?, ? FROM seq`,
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
  const db = openDb(svc);
  stops.push(() => db.close());
  const t0 = performance.now();
  const tokens = await mintSessionTokens(svc, db, options.distinctTokens);
  console.log(
    `  minted ${tokens.length} session tokens in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
  );
  const steps = [1, 1000, options.distinctTokens];
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
    const sizes = [0, options.growthRows / 100, options.growthRows / 10, options.growthRows].map(Math.floor);
    const steps = [];
    for (const rows of sizes) {
      steps.push(await growthStep(rows, stops));
      const s = steps.at(-1);
      if (rows)
        console.log(
          `  bulk-loaded ${rows.toLocaleString('en-US')} rows per table in ${s.loadSeconds.toFixed(1)} s`,
        );
    }
    const before = storage(steps[0].db);
    const rotations = await compare(
      `Refresh rotation (${options.chains} concurrent chains) by rows in refresh_tokens`,
      steps.map((s) => s.rotation),
      { baseline: steps[0].rotation.name },
    );
    const after = storage(steps[0].db);
    const audit = await compare(
      'Dashboard page (audit section, agency-wide) by rows in audit_events, one request at a time',
      steps.map((s) => s.audit),
      { baseline: steps[0].audit.name },
    );
    const me = await distinctTokens(stops);
    return summarize(steps, rotations, audit, me, { before, after, rotations: steps[0].rotation.total });
  } finally {
    for (const stop of stops.reverse()) await stop();
  }
}

function summarize(steps, rotations, audit, me, growth) {
  const biggest = steps.at(-1);
  const rot = rotations[biggest.rotation.name].cpuUs / rotations[steps[0].rotation.name].cpuUs;
  verdict(
    `refresh rotation at ${biggest.rows.toLocaleString('en-US')} rows ÷ empty`,
    `${rot.toFixed(2)}×`,
    rot <= 1.2,
    '≤ 1.2×',
  );
  const page = audit[biggest.audit.name];
  verdict(
    `dashboard with ${biggest.rows.toLocaleString('en-US')} audit events`,
    `p99 ${page.p99} ms (p50 ${page.p50} ms, one request at a time)`,
    page.p99 <= 50,
    'p99 ≤ 50 ms',
  );
  const [one, , many] = me.steps.map(
    (n) => me.table[`GET /me, ${n.toLocaleString('en-US')} distinct session tokens`],
  );
  note(
    `a verified-token cache miss costs ${(many.cpuUs - one.cpuUs).toFixed(0)} CPU µs per request ` +
      `(/me ${one.cpuUs} µs hit, ${many.cpuUs} µs miss)`,
  );
  const perRotation = {
    rows: (growth.after.rows - growth.before.rows) / growth.rotations,
    bytes: (growth.after.bytes - growth.before.bytes) / growth.rotations,
  };
  note(
    `storage per rotation: ${perRotation.rows.toFixed(2)} refresh_tokens rows, ${perRotation.bytes.toFixed(0)} bytes ` +
      `(${growth.rotations} rotations on the empty database); rotated tokens stay until they expire (30 days), so ` +
      `a chain refreshed hourly holds ${Math.round(720 * perRotation.rows)} rows, ` +
      `${Math.round((720 * perRotation.bytes) / 1024)} KiB`,
  );
  const series = [
    {
      name: 'refresh rotation (CPU µs)',
      points: steps.map((s) => [s.rows, rotations[s.rotation.name].cpuUs]),
    },
    {
      name: 'dashboard + audit page (CPU µs)',
      points: steps.map((s) => [s.rows, audit[s.audit.name].cpuUs]),
    },
    {
      name: 'GET /me by distinct tokens (CPU µs)',
      points: me.steps.map((n) => [
        n,
        me.table[`GET /me, ${n.toLocaleString('en-US')} distinct session tokens`].cpuUs,
      ]),
    },
  ];
  return { series, perRotation };
}
