import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import process from 'node:process';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { PACKAGE_IDENTITY } from '../base/package-identity.js';
import {
  type CacheCounter,
  type DependencyState,
  type Metrics,
  REFRESH_OUTCOMES,
  type RefreshOutcome,
} from '../base/metrics.js';
import { type Config, SURFACES, urlHost } from '../config/config.js';
import { REVOKE_REASONS } from '../domain/connections.js';
import type { PoolStats } from '../store/database.js';
import { isServerWideOptions, pathOf, targetProblem } from './request-target.js';
import { PARSER_REFUSAL_STATUSES } from './server.js';

/** The label of every request no route matched: one value, whatever path was asked (bounded cardinality). */
const UNMATCHED_ROUTE = '(unmatched)';

/** Seconds; from a cached token check (well under a millisecond) to a request waiting out a dependency bound. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const CACHES = ['token', 'session_liveness', 'connection_liveness', 'user'] as const;

/**
 * A count kept as a plain number on the hot path and added to its prom-client series when scraped. Why: a labelled
 * child of prom-client 15 (`counter.labels(...)`) still hashes and validates its labels on every `inc`; four such
 * increments per request (the request and three cache lookups) cost `GET /me` 6–9 CPU µs with metrics on
 * (bench/rest.mjs), and every refresh rotation counts its outcome. Counters only: their value at a scrape is the same either way. The latency histogram keeps
 * prom-client's `observe`, as its buckets have no public way to be added to in bulk.
 */
interface PendingCount {
  pending: number;
  series: Counter.Internal;
}

interface RequestSeries extends PendingCount {
  latency: Histogram.Internal<string>;
}

/** A pending count of `counter`'s series `labels`, exported at 0 from the start and flushed with `flushed`. */
function pendingCount(counter: Counter<string>, flushed: PendingCount[], ...labels: string[]): PendingCount {
  const series = counter.labels(...labels);
  series.inc(0);
  const count: PendingCount = { pending: 0, series };
  flushed.push(count);
  return count;
}

/** Hands every pending count to its series (a counter's `collect`, run by prom-client at each scrape). */
function flush(counts: Iterable<PendingCount>): void {
  for (const c of counts) {
    if (c.pending === 0) continue;
    c.series.inc(c.pending);
    c.pending = 0;
  }
}

/**
 * The metrics of one service instance in Prometheus text format (prom-client), in a registry of its own: two
 * instances in one process (the tests) never share a series. Gauges of state (pool, dependencies) are read when
 * scraped, so nothing runs between scrapes.
 */
export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  readonly tokenCache: CacheCounter;
  readonly sessionLiveness: CacheCounter;
  readonly connectionLiveness: CacheCounter;
  readonly users: CacheCounter;
  private readonly requests: Counter<string>;
  private readonly latency: Histogram<string>;
  /** Each request series by its label values: its pending count and its histogram child, found by one map lookup. */
  private readonly series = new Map<string, RequestSeries>();
  private readonly refreshes: Record<RefreshOutcome, PendingCount>;
  private readonly revoked: Counter<string>;
  private readonly refusals: Counter<string>;
  private readonly unparsed: Counter<string>;
  private readonly dependencies = new Map<string, DependencyState>();

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    // Which build each instance runs, as Prometheus exporters say it (`*_build_info`, value 1): a rollout or a rollback
    // shows as `count by (version) (svc_build_info)`.
    new Gauge({
      name: 'svc_build_info',
      help: "This instance's build: the package's version and Node's",
      labelNames: ['version', 'node'],
      registers,
    })
      .labels(PACKAGE_IDENTITY.version, process.version)
      .set(1);
    const labelNames = ['surface', 'method', 'route', 'status_class'];
    const series = this.series;
    this.requests = new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests answered',
      labelNames,
      registers,
      collect: () => flush(series.values()),
    });
    this.latency = new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'Time from the request to the end of its answer',
      labelNames,
      buckets: LATENCY_BUCKETS,
      registers,
    });
    const lookupCounts: PendingCount[] = [];
    const lookups = new Counter({
      name: 'svc_cache_lookups_total',
      help: 'Cache lookups by cache and result (hit or miss)',
      labelNames: ['cache', 'result'],
      registers,
      collect: () => flush(lookupCounts),
    });
    const counter = (cache: (typeof CACHES)[number]): CacheCounter => {
      const hit = pendingCount(lookups, lookupCounts, cache, 'hit');
      const miss = pendingCount(lookups, lookupCounts, cache, 'miss');
      return { lookup: (isHit) => void (isHit ? hit : miss).pending++ };
    };
    [this.tokenCache, this.sessionLiveness, this.connectionLiveness, this.users] = CACHES.map(counter) as [
      CacheCounter,
      CacheCounter,
      CacheCounter,
      CacheCounter,
    ];
    const refreshCounts: PendingCount[] = [];
    const refreshes = new Counter({
      name: 'svc_oauth_refresh_total',
      help: 'Refresh tokens presented, by outcome: rotated, replayed within the grace window, reuse detected (connection revoked)',
      labelNames: ['outcome'],
      registers,
      collect: () => flush(refreshCounts),
    });
    this.refreshes = Object.fromEntries(
      REFRESH_OUTCOMES.map((outcome) => [outcome, pendingCount(refreshes, refreshCounts, outcome)]),
    ) as Record<RefreshOutcome, PendingCount>;
    this.revoked = new Counter({
      name: 'svc_connections_revoked_total',
      help: 'Connections (OAuth grants) ended by this instance, by reason',
      labelNames: ['reason'],
      registers,
    });
    this.refusals = new Counter({
      name: 'svc_rate_limit_refusals_total',
      help: 'Requests refused by a rate limit (429), by limit',
      labelNames: ['limit'],
      registers,
    });
    this.unparsed = new Counter({
      name: 'svc_http_unparsed_requests_total',
      help: 'Requests refused by the HTTP parser before routing (400 bad syntax, 408 too slow, 431 headers too large)',
      labelNames: ['surface', 'status'],
      registers,
    });
    this.dependencyGauge();
    // Every known label value starts at 0, so a rate() or an alert sees the series before its first event.
    for (const reason of REVOKE_REASONS) this.revoked.labels(reason).inc(0);
    for (const surface of SURFACES)
      for (const status of PARSER_REFUSAL_STATUSES) this.unparsed.labels(surface, String(status)).inc(0);
  }

  httpRequest(
    surface: string,
    method: string,
    route: string | undefined,
    status: number,
    seconds: number,
  ): void {
    const key = `${surface} ${method} ${route ?? UNMATCHED_ROUTE} ${Math.floor(status / 100)}`;
    let s = this.series.get(key);
    if (!s) {
      const labels = [surface, method, route ?? UNMATCHED_ROUTE, `${Math.floor(status / 100)}xx`];
      s = { series: this.requests.labels(...labels), pending: 0, latency: this.latency.labels(...labels) };
      this.series.set(key, s);
    }
    s.pending++;
    s.latency.observe(seconds);
  }

  refresh(outcome: RefreshOutcome): void {
    this.refreshes[outcome].pending++;
  }

  connectionRevoked(reason: string, count = 1): void {
    if (count > 0) this.revoked.labels(reason).inc(count);
  }

  unparsedRequest(surface: string, status: number): void {
    this.unparsed.labels(surface, String(status)).inc();
  }

  rateLimited(limit: string): void {
    this.refusals.labels(limit).inc();
  }

  /** Reports a dependency (`database`, `redis`, `auth_server`) as `svc_dependency_up`, read when scraped. */
  observeDependency(name: string, state: DependencyState): void {
    this.dependencies.set(name, state);
  }

  /** Log lines dropped while stdout took none (http/log-output.ts), read when scraped. */
  observeLogDrops(droppedSinceStart: () => number): void {
    let counted = 0;
    new Counter({
      name: 'svc_log_lines_dropped_total',
      help: 'Log lines dropped because stdout took none and LOG_BUFFER_BYTES were held',
      registers: [this.registry],
      collect() {
        const total = droppedSinceStart();
        if (total > counted) this.inc(total - counted);
        counted = total;
      },
    });
  }

  /** PostgreSQL pool gauges, read when scraped. The embedded database has no pool, so none are exported for it. */
  observePool(pool: PoolStats, max: number): void {
    const registers = [this.registry];
    new Gauge({
      name: 'svc_db_pool_connections',
      help: 'PostgreSQL connections of this instance by state (in_use, idle)',
      labelNames: ['state'],
      registers,
      collect() {
        this.labels('in_use').set(pool.totalCount - pool.idleCount);
        this.labels('idle').set(pool.idleCount);
      },
    });
    new Gauge({
      name: 'svc_db_pool_waiting',
      help: 'Requests waiting for a PostgreSQL connection (each for at most DATABASE_CONNECT_TIMEOUT_MS)',
      registers,
      collect() {
        this.set(pool.waitingCount);
      },
    });
    new Gauge({ name: 'svc_db_pool_max', help: 'DATABASE_POOL_SIZE', registers }).set(max);
  }

  private dependencyGauge(): void {
    const dependencies = this.dependencies;
    new Gauge({
      name: 'svc_dependency_up',
      help: 'Whether a dependency answers (1) or is down (0), as this instance last saw it',
      labelNames: ['dependency'],
      registers: [this.registry],
      collect() {
        for (const [name, state] of dependencies) this.labels(name).set(state.available ? 1 : 0);
      },
    });
  }
}

export interface MetricsListener {
  url: string;
  close(): Promise<void>;
}

/**
 * The metrics listener on METRICS_PORT, apart from every public surface: `GET /metrics` and nothing else. Plain
 * node:http (a scrape needs no routing, hooks or JSON), with the same header and request time limits as the surfaces.
 */
export async function listenMetrics(
  config: Config,
  registry: Registry,
  port: number,
): Promise<MetricsListener> {
  const server = createServer(
    { maxHeaderSize: config.maxHeaderBytes, requestTimeout: config.requestTimeoutSeconds * 1000 },
    (request, response) => void answerScrape(registry, request, response),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, config.metricsHost, () => resolve());
  });
  const bound = (server.address() as AddressInfo).port;
  return { url: `http://${urlHost(config.metricsHost)}:${bound}/metrics`, close: () => closeServer(server) };
}

async function answerScrape(
  registry: Registry,
  request: IncomingMessage,
  response: ServerResponse,
): Promise<void> {
  const target = request.url ?? '';
  if (isServerWideOptions(target)) {
    // As on the surfaces (request-target.ts): `OPTIONS *` is answered about the listener, `*` is for OPTIONS only.
    if (request.method !== 'OPTIONS') return plain(response, 400, `${targetProblem(request, target)}\n`);
    response.writeHead(200, { allow: 'GET, HEAD', 'content-length': '0', 'cache-control': 'no-store' });
    return void response.end();
  }
  if (pathOf(target) !== '/metrics') return plain(response, 404, 'Not found: the metrics are at /metrics\n');
  if (request.method !== 'GET' && request.method !== 'HEAD') {
    response.setHeader('allow', 'GET, HEAD');
    return plain(response, 405, 'Method not allowed: use GET\n');
  }
  try {
    const body = await registry.metrics();
    response.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' });
    response.end(request.method === 'HEAD' ? undefined : body);
  } catch {
    plain(response, 500, 'The metrics could not be collected\n');
  }
}

function plain(response: ServerResponse, status: number, text: string): void {
  response.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  response.end(text);
}

function closeServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  // A scraper keeps its connection alive between scrapes; nothing is in flight that a stop should wait for.
  server.closeAllConnections();
  return closed;
}
