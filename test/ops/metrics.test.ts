import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { NO_METRICS } from '../../src/base/metrics.js';
import { loadConfig } from '../../src/config/config.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { connect, register, token } from '../auth/oauth-helpers.js';
import { rawRequest } from '../helpers/raw-http.js';
import { PACKAGE_IDENTITY } from '../../src/base/package-identity.js';

/**
 * Prometheus metrics on their own listener (METRICS_PORT), driven by real requests: the counters must move with the
 * labels an operator's queries and alerts use, and the endpoint must never be reachable on a public surface.
 */

let server: TestServer;
let scrape: () => Promise<Samples>;

beforeAll(async () => {
  server = await startTestServer({
    env: { METRICS_PORT: '0', SIGNIN_LIMIT_PER_USERNAME: '2', DCR_LIMIT_PER_IP: '2' },
  });
  scrape = async () => {
    const res = await fetch(server.services.metricsUrl!);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain; version=0.0.4');
    return parse(await res.text());
  };
});
afterAll(() => server?.close());

type Samples = { name: string; labels: Record<string, string>; value: number }[];

/** The Prometheus text format, one sample per line (`name{label="value",...} number`). */
function parse(text: string): Samples {
  const samples: Samples = [];
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) continue;
    const labels = Object.fromEntries(
      [...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]),
    );
    samples.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return samples;
}

/** The value of the one sample with this name and (at least) these labels; 0 when absent. */
function value(samples: Samples, name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
  expect(found.length, `${name} ${JSON.stringify(labels)}`).toBeLessThanOrEqual(1);
  return found[0]?.value ?? 0;
}

const wrongPassword = () =>
  fetch(`${server.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'grace', password: 'not-her-password' }),
  });

/** A connection of the pre-registered client (DCR is spent by the limit test) and a refresh of its tokens. */
async function refreshChain() {
  const { tokens, clientId } = await connect(server, {
    clientId: 'claude-code',
    redirectUri: 'http://127.0.0.1:9999/callback',
  });
  const refresh = (rt: string) =>
    token(server, { grant_type: 'refresh_token', refresh_token: rt, client_id: clientId });
  return { tokens, refresh };
}

describe(`metrics on METRICS_PORT (${ENGINE})`, () => {
  it('counts requests by surface, route pattern and status class, with a latency histogram', async () => {
    const before = await scrape();
    const { token: session } = await signIn(server);
    for (let i = 0; i < 2; i++)
      await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${session}` } });
    await fetch(`${server.url.api}/no/such/path/${Math.random()}`);
    const after = await scrape();
    const delta = (labels: Record<string, string>) =>
      value(after, 'svc_http_requests_total', labels) - value(before, 'svc_http_requests_total', labels);
    expect(delta({ surface: 'auth', method: 'POST', route: '/api/sessions', status_class: '2xx' })).toBe(1);
    expect(delta({ surface: 'api', method: 'GET', route: '/me', status_class: '2xx' })).toBe(2);
    // Unmatched paths are one label value, whatever the path: no raw path ever becomes a label.
    expect(delta({ surface: 'api', method: 'GET', route: '(unmatched)', status_class: '4xx' })).toBe(1);
    expect(after.some((s) => Object.values(s.labels).some((v) => v.includes('/no/such')))).toBe(false);
    const meCount = { surface: 'api', route: '/me', status_class: '2xx' };
    expect(value(after, 'svc_http_request_duration_seconds_count', meCount)).toBe(
      value(after, 'svc_http_requests_total', meCount),
    );
    expect(value(after, 'svc_http_request_duration_seconds_bucket', { ...meCount, le: '+Inf' })).toBe(
      value(after, 'svc_http_requests_total', meCount),
    );
    // The second /me found its token verified already and its session live (LIVENESS_CACHE_SECONDS).
    expect(value(after, 'svc_cache_lookups_total', { cache: 'token', result: 'hit' })).toBeGreaterThan(0);
    expect(value(after, 'svc_cache_lookups_total', { cache: 'token', result: 'miss' })).toBeGreaterThan(0);
    expect(
      value(after, 'svc_cache_lookups_total', { cache: 'session_liveness', result: 'hit' }),
    ).toBeGreaterThan(0);
  });

  it('counts requests the HTTP parser refused before routing, by surface and status', async () => {
    const labels = { surface: 'api', status: '431' };
    const first = await scrape();
    // Every surface and status is a series from the start (at 0), so an alert on its rate sees it before the first.
    const series = (l: Record<string, string>) =>
      first.some(
        (s) =>
          s.name === 'svc_http_unparsed_requests_total' &&
          s.labels['surface'] === l['surface'] &&
          s.labels['status'] === l['status'],
      );
    expect(series({ surface: 'agency-mcp', status: '408' })).toBe(true);
    expect(series({ surface: 'auth', status: '400' })).toBe(true);
    const before = value(first, 'svc_http_unparsed_requests_total', labels);
    const res = await rawRequest(`${server.url.api}/me`, { headers: [['X-Padding', 'a'.repeat(64 * 1024)]] });
    expect(res.status).toBe(431);
    expect(value(await scrape(), 'svc_http_unparsed_requests_total', labels)).toBe(before + 1);
  });

  it('counts sign-in and registration refusals by limit', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await wrongPassword()).status);
    expect(statuses).toEqual([401, 401, 429]);
    const redirect = { redirect_uris: ['http://127.0.0.1:9999/cb'] };
    const registrations: number[] = [];
    for (let i = 0; i < 3; i++)
      registrations.push((await register(server, { ...redirect, client_name: `m${i}` })).res.status);
    expect(registrations).toEqual([201, 201, 429]);
    const after = await scrape();
    expect(value(after, 'svc_rate_limit_refusals_total', { limit: 'signin-user-ip' })).toBe(1);
    expect(value(after, 'svc_rate_limit_refusals_total', { limit: 'dcr-ip' })).toBe(1);
  });

  it('counts refresh rotations, replays within the grace window, reuse detections and revocations by reason', async () => {
    const { tokens, refresh } = await refreshChain();
    const first = tokens['refresh_token']!;
    expect((await refresh(first)).res.status).toBe(200);
    expect((await refresh(first)).res.status).toBe(200); // the same token again, within the grace window
    server.clock.advance((server.config.oauth.refreshReuseGraceSeconds + 1) * 1000);
    expect((await refresh(first)).body['error']).toBe('invalid_grant'); // after it: reuse, the connection ends
    const after = await scrape();
    expect(value(after, 'svc_oauth_refresh_total', { outcome: 'rotated' })).toBe(1);
    expect(value(after, 'svc_oauth_refresh_total', { outcome: 'grace_replay' })).toBe(1);
    expect(value(after, 'svc_oauth_refresh_total', { outcome: 'reuse_detected' })).toBe(1);
    expect(value(after, 'svc_connections_revoked_total', { reason: 'refresh_reuse' })).toBe(1);
    // Every reason is a series from the start, so an alert on its rate sees it before the first revocation.
    expect(
      after.some(
        (s) => s.name === 'svc_connections_revoked_total' && s.labels['reason'] === 'member_removed',
      ),
    ).toBe(true);
  });

  it('counts the reuse of a token whose row was pruned after its rotation, like any reuse', async () => {
    const { tokens, refresh } = await refreshChain();
    const before = await scrape();
    const first = tokens['refresh_token']!;
    const second = (await refresh(first)).body['refresh_token'] as string;
    expect((await refresh(second)).res.status).toBe(200); // this rotation deletes the row of `first`
    expect((await refresh(first)).body['error']).toBe('invalid_grant');
    const after = await scrape();
    const delta = (name: string, labels: Record<string, string>) =>
      value(after, name, labels) - value(before, name, labels);
    expect(delta('svc_oauth_refresh_total', { outcome: 'reuse_detected' })).toBe(1);
    expect(delta('svc_connections_revoked_total', { reason: 'refresh_reuse' })).toBe(1);
  });

  it('reports the database as up, its pool on PostgreSQL, and process metrics', async () => {
    const samples = await scrape();
    expect(value(samples, 'svc_dependency_up', { dependency: 'database' })).toBe(1);
    const pool = samples.filter((s) => s.name === 'svc_db_pool_connections');
    if (ENGINE === 'postgres') {
      expect(pool.map((s) => s.labels['state']).sort()).toEqual(['idle', 'in_use']);
      expect(value(samples, 'svc_db_pool_waiting')).toBe(0);
      expect(value(samples, 'svc_db_pool_max')).toBe(server.config.databasePoolSize);
    } else {
      // The embedded database has one in-process connection and no pool: no pool series at all.
      expect(pool).toEqual([]);
    }
    expect(samples.some((s) => s.name === 'process_cpu_seconds_total')).toBe(true);
    expect(samples.some((s) => s.name === 'nodejs_heap_size_used_bytes')).toBe(true);
  });

  it('says which build the instance runs (svc_build_info, 1, with the package version and Node version)', async () => {
    const build = (await scrape()).filter((s) => s.name === 'svc_build_info');
    expect(build).toEqual([
      {
        name: 'svc_build_info',
        labels: { version: PACKAGE_IDENTITY.version, node: process.version },
        value: 1,
      },
    ]);
  });

  it('serves /metrics only on its own listener: never on a public surface', async () => {
    for (const url of Object.values(server.url)) {
      const res = await fetch(`${url}/metrics`);
      expect(res.status, url).toBe(404);
      expect(await res.text()).not.toContain('svc_http_requests_total');
    }
    const listener = new URL(server.services.metricsUrl!);
    expect(listener.hostname).toBe('127.0.0.1');
    expect(Object.values(server.url).some((u) => new URL(u).port === listener.port)).toBe(false);
    expect((await fetch(new URL('/', listener))).status).toBe(404);
    const post = await fetch(listener, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');
    // RFC 9110 §9.3.7, as on the surfaces; it was the listener's 404.
    const serverWide = await rawRequest(listener.origin, { method: 'OPTIONS', target: '*' });
    expect(serverWide.status).toBe(200);
    expect(serverWide.header('allow')).toBe('GET, HEAD');
    expect(serverWide.header('content-length')).toBe('0');
    const getStar = await rawRequest(listener.origin, { method: 'GET', target: '*' });
    expect(getStar.status).toBe(400);
    expect(getStar.body).toContain('for OPTIONS only');
  });
});

describe(`metrics on an address of their own (${ENGINE})`, () => {
  it('METRICS_HOST binds the listener there, whatever HOST the surfaces face', async () => {
    // Before, the listener always bound HOST: with HOST=0.0.0.0 the metrics faced the same network as the surfaces.
    const own = await startTestServer({ env: { METRICS_PORT: '0', METRICS_HOST: '127.0.0.2' } });
    try {
      const listener = new URL(own.services.metricsUrl!);
      expect(listener.hostname).toBe('127.0.0.2');
      expect((await fetch(listener)).status).toBe(200);
      const onHost = await fetch(`http://127.0.0.1:${listener.port}/metrics`).then(
        (r) => r.status,
        () => 'refused',
      );
      expect(onHost).toBe('refused');
    } finally {
      await own.close();
    }
  });
});

describe(`metrics are per instance and off by default (${ENGINE})`, () => {
  it('a second instance in the same process has its own registry, and sees its Redis down', async () => {
    const other = await startTestServer({ env: { METRICS_PORT: '0', REDIS_URL: 'redis://127.0.0.1:1' } });
    try {
      await signIn(other);
      // The down state is learnt from the first failed connect; /ready waits for it.
      await fetch(`${other.url.api}/ready`);
      const samples = parse(await (await fetch(other.services.metricsUrl!)).text());
      expect(value(samples, 'svc_dependency_up', { dependency: 'redis' })).toBe(0);
      expect(value(samples, 'svc_http_requests_total', { surface: 'api', route: '/me' })).toBe(0);
      expect(value(samples, 'svc_rate_limit_refusals_total', { limit: 'signin-user-ip' })).toBe(0);
    } finally {
      await other.close();
    }
  });

  it('without METRICS_PORT there is no metrics listener', async () => {
    expect(loadConfig({}).metricsPort).toBeUndefined();
    const plain = await startTestServer({ seed: false });
    try {
      expect(plain.services.metricsUrl).toBeUndefined();
      expect(plain.services.ctx.metrics).toBe(NO_METRICS);
    } finally {
      await plain.close();
    }
  });
});
