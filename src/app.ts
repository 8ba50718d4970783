import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { sql } from 'kysely';
import { authServerReadiness } from './agency-mcp/gateway.js';
import { agencyMcpSurface } from './agency-mcp/plugin.js';
import { apiServerOptions, apiSurface } from './api/plugin.js';
import { healthRoute } from './http/health.js';
import { authServerOptions, authSurface } from './auth/plugin.js';
import { AI_CATALOG_PATH } from './companions/ai-catalog.js';
import { mcpHostCompanions, restHostCompanions } from './companions/hosts.js';
import { dashboardRoutes } from './dashboard/dashboard.js';
import { signInRoutes } from './dashboard/sign-in.js';
import { dashboardApiRoutes } from './dashboard-api/plugin.js';
import {
  type Config,
  knownUrl,
  PORT_SETTINGS,
  publishBindings,
  requirePublicUrls,
  SURFACES,
  type Surface,
} from './config/config.js';
import { type AppContext, type Readiness, urls } from './context.js';
import { atMostEvery, type Clock, systemClock } from './base/clock.js';
import { watchEventLoop } from './base/event-loop-watch.js';
import { isConnectionLive } from './domain/connections.js';
import { isEmpty, seedDemo } from './domain/demo-seed.js';
import { isSessionLive } from './domain/sessions.js';
import { findUserById } from './domain/users.js';
import { type CacheCounter, type Metrics, NO_METRICS } from './base/metrics.js';
import { PACKAGE_IDENTITY } from './base/package-identity.js';
import {
  connectRedis,
  countRefusals,
  type LimiterFactory,
  memoryLimiters,
  type RedisConnection,
  redisLimiters,
} from './http/rate-limit.js';
import { DependencyWatch, refusesWrites, WritesWatch } from './http/dependency-outage.js';
import { boundedLogger, droppedLogLines } from './http/log-output.js';
import { asListenFailure } from './http/listen-failure.js';
import { listenMetrics, type MetricsListener, PrometheusMetrics } from './http/metrics.js';
import { createServer, type SurfaceServerOptions } from './http/server.js';
import { MCP_SERVER_OPTIONS } from './mcp-kit/endpoint.js';
import { mcpSurface } from './mcp/plugin.js';
import { CachedLookup } from './store/cached-lookup.js';
import { openStore, type Store } from './store/database.js';
import { embeddedFileExposure } from './store/embedded-file.js';
import { migrateToLatest } from './store/migrate.js';
import { LivenessCache } from './tokens/liveness.js';
import { SigningKeys } from './tokens/signing-keys.js';
import { MAX_CLOCK_SKEW_MS, TokenVerifier } from './tokens/verifier.js';
import type { VersionRegistry } from './versions/registry.js';
import { versions as releasedVersions } from './versions/versions.js';
import { WebSessions } from './web/web-session.js';

interface SurfaceModule {
  plugin: (app: FastifyInstance, ctx: AppContext) => Promise<void>;
  /** Server-level behaviour the surface owns: static headers, the shape of raw connection errors. */
  serverOptions?: (ctx: AppContext) => SurfaceServerOptions;
  /**
   * What the surface needs beyond the context's dependencies to serve, checked by its `/ready` beside them: each one
   * down makes it 503, as the database does.
   */
  readiness?: (ctx: AppContext) => Promise<Readiness['checks']>;
  /** The surface serves `GET /health` itself (the REST API's, SPEC §2.3, in its contract's shape and headers). */
  ownHealth?: true;
}

/**
 * Each surface with what it is handed from the layers above it: the companions (public documents describing every
 * surface) and the member pages are built here, so no surface imports another one's folder to get them.
 */
const SURFACE_MODULES: Record<Surface, SurfaceModule> = {
  api: {
    plugin: (app, ctx) => apiSurface(app, ctx, restHostCompanions(ctx)),
    serverOptions: (ctx) => apiServerOptions(ctx, AI_CATALOG_PATH),
    ownHealth: true,
  },
  mcp: {
    plugin: (app, ctx) => mcpSurface(app, ctx, mcpHostCompanions(ctx, 'user')),
    serverOptions: () => MCP_SERVER_OPTIONS,
  },
  'agency-mcp': {
    plugin: (app, ctx) => agencyMcpSurface(app, ctx, mcpHostCompanions(ctx, 'agency')),
    serverOptions: () => MCP_SERVER_OPTIONS,
    readiness: authServerReadiness,
  },
  auth: {
    plugin: (app, ctx) =>
      authSurface(app, ctx, {
        signIn: (pages) => signInRoutes(pages, ctx),
        dashboard: (pages, registry) => dashboardRoutes(pages, ctx, registry),
        api: (scope) => dashboardApiRoutes(scope, ctx),
      }),
    serverOptions: authServerOptions,
  },
};

export interface StartOptions {
  only?: readonly Surface[];
  clock?: Clock;
  logger?: FastifyBaseLogger;
  versions?: VersionRegistry;
  limiters?: LimiterFactory;
  /** Seed the demo when the embedded database is empty (default: on outside production). */
  seedDemoIfEmpty?: boolean;
}

export interface Services {
  ctx: AppContext;
  servers: Partial<Record<Surface, FastifyInstance>>;
  /** `http://HOST:PORT/metrics` when METRICS_PORT is set (the bound port when it is 0). */
  metricsUrl: string | undefined;
  close(): Promise<void>;
}

/** What the context is built with beyond the start options: this instance's metrics registry, when there is one. */
type ContextOptions = StartOptions & { prometheus?: PrometheusMetrics | undefined };

export function createLogger(config: Config): FastifyBaseLogger {
  return boundedLogger(
    { level: config.logLevel, base: { service: 'svc' } },
    config.logBufferBytes,
    systemClock,
  );
}

/** Opens the store, migrates, loads keys, builds the requested surfaces and listens. */
export async function startServices(config: Config, o: StartOptions = {}): Promise<Services> {
  requirePublicUrls(config);
  const log = o.logger ?? createLogger(config);
  // One registry per instance, made here and nowhere else: two instances in one process never share a series.
  const prometheus = config.metricsPort === undefined ? undefined : new PrometheusMetrics();
  const logDrops = droppedLogLines(log);
  if (logDrops) prometheus?.observeLogDrops(logDrops);
  const ctx = await createContext(config, log, { ...o, prometheus });
  const exposure = ctx.store.engine === 'sqlite' ? embeddedFileExposure(config.dataDir) : undefined;
  if (exposure) log.warn({ data_dir: config.dataDir }, exposure);
  const servers: Partial<Record<Surface, FastifyInstance>> = {};
  let metrics: MetricsListener | undefined;
  try {
    for (const surface of o.only ?? SURFACES)
      servers[surface] = await listen(ctx, surface, SURFACE_MODULES[surface]);
    publishUrls(ctx, servers);
    if (prometheus) {
      metrics = await listenMetrics(config, prometheus.registry, config.metricsPort!).catch((e: unknown) => {
        throw asListenFailure(
          e,
          'the metrics listener',
          config.metricsHost === config.host ? 'HOST, METRICS_PORT' : 'METRICS_HOST, METRICS_PORT',
        );
      });
      log.info({ url: metrics.url }, 'metrics listening');
    }
  } catch (e) {
    await shutdown(ctx, servers, metrics);
    throw e;
  }
  const stopWatching = watchEventLoop(log);
  const stopKeyReads = ctx.keys.keepCurrent();
  const close = () => {
    stopWatching();
    stopKeyReads();
    return shutdown(ctx, servers, metrics);
  };
  return { ctx, servers, metricsUrl: metrics?.url, close };
}

export async function createContext(
  config: Config,
  log: FastifyBaseLogger,
  o: ContextOptions = {},
): Promise<AppContext> {
  const database = new DependencyWatch('database', log);
  const writes = new WritesWatch('database', log, o.clock ?? systemClock);
  const store = openStore(config, {
    failed: (error) => (refusesWrites(error) ? writes.refused(error) : database.failed(error)),
    succeeded: (wrote) => {
      database.succeeded();
      if (wrote) writes.wrote();
    },
  });
  o.prometheus?.observeDependency('database', database);
  o.prometheus?.observeDependency('database_writes', writes);
  if (store.pool) o.prometheus?.observePool(store.pool, config.databasePoolSize);
  try {
    return await buildContext(config, log, store, writes, o);
  } catch (e) {
    await store.close();
    throw e;
  }
}

async function buildContext(
  config: Config,
  log: FastifyBaseLogger,
  store: Store,
  writes: WritesWatch,
  o: ContextOptions,
): Promise<AppContext> {
  const clock = o.clock ?? systemClock;
  const metrics = o.prometheus ?? NO_METRICS;
  await prepareDatabase(config, log, store, clock, o);
  // Retired keys stay published for the longest token life they may have signed.
  const keys = new SigningKeys(store.db, clock, config.signingAlg, config.sessionTtlSeconds * 1000);
  await keys.init();
  // What tells the operator that a withdrawal (or the end of a retired key's overlap) reached this instance.
  keys.whenKeysGone((kids) =>
    log.info({ kids }, 'signing keys no longer accepted: every token they signed is refused here'),
  );
  const reads = cachedReads(config, store, clock, metrics);
  const redis = config.redisUrl ? openRedis(config.redisUrl, log, o.prometheus) : undefined;
  const verifier = new TokenVerifier({
    issuer: () => knownUrl(config, 'auth') ?? '',
    keys,
    clock,
    cacheSize: config.tokenCacheSize,
    sessions: reads.sessionLiveness,
    connections: reads.connectionLiveness,
    cacheCounter: metrics.tokenCache,
    clockBehind: clockBehindWarning(log, clock),
  });
  return {
    config,
    store,
    db: store.db,
    clock,
    log,
    metrics,
    keys,
    ...reads,
    verifier,
    webSessions: new WebSessions({
      issuer: () => urls.issuer(config),
      verifier,
      sessionTtlSeconds: config.sessionTtlSeconds,
    }),
    versions: o.versions ?? releasedVersions,
    limiters: countRefusals(o.limiters ?? (redis ? redisLimiters(redis) : memoryLimiters), (limit) =>
      metrics.rateLimited(limit),
    ),
    readiness: () => checkReadiness(store, writes, redis),
    async close() {
      await redis?.close();
      await store.close();
    },
  };
}

/** How often at most the log says again that this instance's clock is behind its tokens' issuer. */
const CLOCK_WARNING_INTERVAL_MS = 60_000;

/**
 * A warning, at most once a minute, when tokens this service signed are dated ahead of this instance's clock by more
 * than the verifier allows: their holders get 401 here until the clock catches up, which no client can fix.
 */
function clockBehindWarning(log: FastifyBaseLogger, clock: Clock): (aheadMs: number) => void {
  const due = atMostEvery(CLOCK_WARNING_INTERVAL_MS, clock);
  return (aheadMs) => {
    if (!due()) return;
    // Set back, or drifting: the instances' time synchronisation (NTP) is what to look at.
    log.warn(
      { ahead_ms: Math.round(aheadMs), allowed_ms: MAX_CLOCK_SKEW_MS },
      "clock behind the tokens' issuer: tokens refused until it catches up",
    );
  };
}

/** Migrates, and seeds the demo on an empty embedded database when asked (never in production). */
async function prepareDatabase(
  config: Config,
  log: FastifyBaseLogger,
  store: Store,
  clock: Clock,
  o: ContextOptions,
): Promise<void> {
  const applied = await migrateToLatest(store.db);
  if (applied.length) log.info({ migrations: applied.map((m) => m.migrationName) }, 'migrations applied');
  const seed = o.seedDemoIfEmpty ?? !config.production;
  if (seed && store.engine === 'sqlite' && (await isEmpty(store.db))) {
    log.info({ users: await seedDemo(store.db, clock, config.production) }, 'demo seeded');
  }
}

/**
 * The per-request reads kept for LIVENESS_CACHE_SECONDS (the README's revocation bound): session and connection
 * liveness, user rows and OAuth clients' version pins.
 */
function cachedReads(config: Config, store: Store, clock: Clock, metrics: Metrics) {
  const ttlMs = config.livenessCacheSeconds * 1000;
  const capacity = config.tokenCacheSize;
  const liveness = (
    check: (sql: Store['sql'], c: Clock, id: string) => Promise<boolean>,
    counter: CacheCounter,
  ) => new LivenessCache(clock, ttlMs, capacity, (id) => check(store.sql, clock, id), counter);
  return {
    sessionLiveness: liveness(isSessionLive, metrics.sessionLiveness),
    // OAuth tokens carrying `cid` are accepted only while their connection (the grant) is live (docs/contract.md#connections).
    connectionLiveness: liveness(isConnectionLive, metrics.connectionLiveness),
    users: new CachedLookup({
      clock,
      ttlMs,
      capacity,
      load: (id) => findUserById(store.db, id),
      counter: metrics.users,
    }),
    clientPins: new CachedLookup({
      clock,
      ttlMs,
      capacity,
      load: async (clientId) =>
        (
          await store.db
            .selectFrom('oauth_clients')
            .select('api_version')
            .where('client_id', '=', clientId)
            .executeTakeFirst()
        )?.api_version ?? null,
    }),
  };
}

/** Redis for the shared rate limits, its outages logged once by its watch and reported as `svc_dependency_up`. */
function openRedis(url: string, log: FastifyBaseLogger, prometheus: PrometheusMetrics | undefined) {
  const watch = new DependencyWatch('redis (rate limits fall back to memory)', log);
  prometheus?.observeDependency('redis', watch);
  return connectRedis(url, watch);
}

/** How long readiness waits for each dependency before calling it down. */
const READINESS_TIMEOUT_MS = 2000;

/**
 * Each dependency answers a trivial request within the bound, or is down; whether the database accepts writes is as
 * the last writes found it (a full disk, PostgreSQL read-only), since no probe can write without writing.
 */
async function checkReadiness(
  store: Store,
  writes: WritesWatch,
  redis: RedisConnection | undefined,
): Promise<Readiness> {
  const within = <T>(work: Promise<T>) =>
    Promise.race([
      work.then(() => 'up' as const),
      new Promise<'down'>((resolve) => setTimeout(() => resolve('down'), READINESS_TIMEOUT_MS).unref()),
    ]).catch(() => 'down' as const);
  const [database, cache] = await Promise.all([
    within(sql`select 1`.execute(store.db)),
    // A failed ping is an outage like any other: logged once by the watch, the limits counting in memory meanwhile.
    redis
      ? within(
          redis.answered(redis.client.ping()).catch((e: unknown) => (redis.failed(e), Promise.reject(e))),
        )
      : undefined,
  ]);
  // A database that does not answer takes no writes either.
  const databaseWrites = database === 'up' && writes.available ? 'up' : 'down';
  const checks: Readiness['checks'] = {
    database,
    database_writes: databaseWrites,
    ...(cache ? { redis: cache } : {}),
  };
  // Neither makes the instance unready: with Redis down it serves every request, its limits counting in its memory;
  // with writes refused it serves every read. Every instance shares the one Redis and the one database, so a 503 here
  // would take them all out of rotation at once: an outage of the service for a rate-limit counter, or of the reads
  // for the writes. The operator is told by the log, the metric and `checks`.
  const degraded = cache === 'down' || databaseWrites === 'down';
  const status = database === 'down' ? 'unavailable' : degraded ? 'degraded' : 'ready';
  return { status, checks };
}

/**
 * GET /ready on every host, for a load balancer: 200 while this instance can serve (`ready`, or `degraded` with Redis
 * down or writes refused), else 503 naming what it cannot serve without: the database, or what the surface needs of
 * its own (a split agency MCP server's authorization server). GET /health stays liveness only (the process serves).
 */
function readinessRoute(app: FastifyInstance, ctx: AppContext, module: SurfaceModule): void {
  app.get('/ready', async (_request, reply) => {
    const [shared, own] = await Promise.all([ctx.readiness(), module.readiness?.(ctx) ?? {}]);
    const checks = { ...shared.checks, ...own };
    const status = Object.values(own).includes('down') ? 'unavailable' : shared.status;
    const serving = status !== 'unavailable';
    return reply
      .code(serving ? 200 : 503)
      .header('cache-control', 'no-store')
      .headers(serving ? {} : { 'retry-after': '5' })
      .send({ status, checks });
  });
}

async function listen(ctx: AppContext, surface: Surface, module: SurfaceModule): Promise<FastifyInstance> {
  const { config } = ctx;
  const app = createServer(config, {
    surface,
    logger: ctx.log,
    metrics: ctx.metrics,
    ...module.serverOptions?.(ctx),
  });
  // The REST API registers its own, within its scope.
  if (!module.ownHealth) healthRoute(app);
  readinessRoute(app, ctx, module);
  await app.register(async (scope) => module.plugin(scope, ctx));
  try {
    await app.listen({ host: config.host, port: config.ports[surface] });
  } catch (e) {
    await app.close().catch(() => {}); // what could not listen has nothing to close but its plugins
    throw asListenFailure(e, `the ${surface} surface`, `HOST, ${PORT_SETTINGS[surface]}`);
  }
  return app;
}

/**
 * Publishes where every surface listens, once all have bound: before that, only configured URLs are known (a surface
 * on port 0 has none until it listens), so nothing reads a URL until the services have started.
 */
function publishUrls(ctx: AppContext, servers: Partial<Record<Surface, FastifyInstance>>): void {
  const ports = Object.fromEntries(
    Object.entries(servers).map(([surface, app]) => [surface, (app.server.address() as AddressInfo).port]),
  );
  const urls = publishBindings(ctx.config, ports);
  for (const [surface, port] of Object.entries(ports)) {
    const url = urls[surface as Surface];
    ctx.log.info(
      { surface, url, listen: `${ctx.config.host}:${port}`, version: PACKAGE_IDENTITY.version },
      'listening',
    );
  }
}

/** Stops accepting, lets in-flight requests finish, then closes the database. */
async function shutdown(
  ctx: AppContext,
  servers: Partial<Record<Surface, FastifyInstance>>,
  metrics: MetricsListener | undefined,
): Promise<void> {
  await Promise.allSettled([...Object.values(servers).map((s) => s.close()), metrics?.close()]);
  await ctx.close();
}
