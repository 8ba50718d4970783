import type { AddressInfo } from 'node:net';
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { sql } from 'kysely';
import { pino } from 'pino';
import { agencyMcpSurface } from './agency-mcp/plugin.js';
import { apiServerOptions, apiSurface } from './api/plugin.js';
import { authSurface } from './auth/plugin.js';
import { AI_CATALOG_PATH } from './companions/ai-catalog.js';
import { mcpHostCompanions, restHostCompanions } from './companions/hosts.js';
import { dashboardRoutes } from './dashboard/dashboard.js';
import { signInRoutes } from './dashboard/sign-in.js';
import { dashboardApiRoutes } from './dashboard-api/plugin.js';
import { type Config, knownUrl, publishBinding, SURFACES, type Surface } from './config/config.js';
import type { AppContext, Readiness } from './context.js';
import { type Clock, systemClock } from './base/clock.js';
import { isConnectionLive } from './domain/connections.js';
import { isEmpty, seedDemo } from './domain/demo-seed.js';
import { isSessionLive } from './domain/sessions.js';
import { findUserById } from './domain/users.js';
import { connectRedis, type LimiterFactory, memoryLimiters, redisLimiters } from './http/rate-limit.js';
import { DependencyWatch } from './http/dependency-outage.js';
import { createServer, type SurfaceServerOptions } from './http/server.js';
import { MCP_SERVER_OPTIONS } from './mcp-kit/endpoint.js';
import { mcpSurface } from './mcp/plugin.js';
import { CachedLookup } from './store/cached-lookup.js';
import { openStore, type Store } from './store/database.js';
import { migrateToLatest } from './store/migrate.js';
import { LivenessCache } from './tokens/liveness.js';
import { SigningKeys } from './tokens/signing-keys.js';
import { TokenVerifier } from './tokens/verifier.js';
import type { VersionRegistry } from './versions/registry.js';
import { versions as releasedVersions } from './versions/versions.js';

interface SurfaceModule {
  plugin: (app: FastifyInstance, ctx: AppContext) => Promise<void>;
  /** Server-level behaviour the surface owns: static headers, the shape of raw connection errors. */
  serverOptions?: (ctx: AppContext) => SurfaceServerOptions;
}

/**
 * Each surface with what it is handed from the layers above it: the companions (public documents describing every
 * surface) and the member pages are built here, so no surface imports another one's folder to get them.
 */
const SURFACE_MODULES: Record<Surface, SurfaceModule> = {
  api: {
    plugin: (app, ctx) => apiSurface(app, ctx, restHostCompanions(ctx)),
    serverOptions: (ctx) => apiServerOptions(ctx, AI_CATALOG_PATH),
  },
  mcp: {
    plugin: (app, ctx) => mcpSurface(app, ctx, mcpHostCompanions(ctx, 'user')),
    serverOptions: () => MCP_SERVER_OPTIONS,
  },
  'agency-mcp': {
    plugin: (app, ctx) => agencyMcpSurface(app, ctx, mcpHostCompanions(ctx, 'agency')),
    serverOptions: () => MCP_SERVER_OPTIONS,
  },
  auth: {
    plugin: (app, ctx) =>
      authSurface(app, ctx, {
        signIn: (pages) => signInRoutes(pages, ctx),
        dashboard: (pages, registry) => dashboardRoutes(pages, ctx, registry),
        api: (scope) => dashboardApiRoutes(scope, ctx),
      }),
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
  close(): Promise<void>;
}

export function createLogger(config: Config): FastifyBaseLogger {
  return pino({ level: config.logLevel, base: { service: 'svc' } });
}

/** Opens the store, migrates, loads keys, builds the requested surfaces and listens. */
export async function startServices(config: Config, o: StartOptions = {}): Promise<Services> {
  const log = o.logger ?? createLogger(config);
  const ctx = await createContext(config, log, o);
  const servers: Partial<Record<Surface, FastifyInstance>> = {};
  try {
    for (const surface of o.only ?? SURFACES)
      servers[surface] = await listen(ctx, surface, SURFACE_MODULES[surface]);
  } catch (e) {
    await Promise.allSettled(Object.values(servers).map((s) => s.close()));
    await ctx.close();
    throw e;
  }
  return { ctx, servers, close: () => shutdown(ctx, servers) };
}

export async function createContext(
  config: Config,
  log: FastifyBaseLogger,
  o: StartOptions = {},
): Promise<AppContext> {
  const store = openStore(config, new DependencyWatch('database', log));
  try {
    return await buildContext(config, log, store, o);
  } catch (e) {
    await store.close();
    throw e;
  }
}

async function buildContext(
  config: Config,
  log: FastifyBaseLogger,
  store: Store,
  o: StartOptions,
): Promise<AppContext> {
  const clock = o.clock ?? systemClock;
  const applied = await migrateToLatest(store.db);
  if (applied.length) log.info({ migrations: applied.map((m) => m.migrationName) }, 'migrations applied');
  const seed = o.seedDemoIfEmpty ?? !config.production;
  if (seed && store.engine === 'sqlite' && (await isEmpty(store.db))) {
    log.info({ users: await seedDemo(store.db, clock, config.production) }, 'demo seeded');
  }
  // Retired keys stay published for the longest token life they may have signed.
  const keys = new SigningKeys(store.db, clock, config.signingAlg, config.sessionTtlSeconds * 1000);
  await keys.init();
  const ttlMs = config.livenessCacheSeconds * 1000;
  const sessionLiveness = new LivenessCache(clock, ttlMs, config.tokenCacheSize, (sid) =>
    isSessionLive(store.sql, clock, sid),
  );
  // OAuth tokens carrying `cid` are accepted only while their connection (the grant) is live (docs/contract.md#connections).
  const connectionLiveness = new LivenessCache(clock, ttlMs, config.tokenCacheSize, (cid) =>
    isConnectionLive(store.sql, clock, cid),
  );
  const redis = config.redisUrl
    ? connectRedis(config.redisUrl, new DependencyWatch('redis (rate limits fall back to memory)', log))
    : undefined;
  const ctx: AppContext = {
    config,
    store,
    db: store.db,
    clock,
    log,
    keys,
    sessionLiveness,
    connectionLiveness,
    users: new CachedLookup({
      clock,
      ttlMs,
      capacity: config.tokenCacheSize,
      load: (id) => findUserById(store.db, id),
    }),
    clientPins: new CachedLookup({
      clock,
      ttlMs,
      capacity: config.tokenCacheSize,
      load: async (clientId) =>
        (
          await store.db
            .selectFrom('oauth_clients')
            .select('api_version')
            .where('client_id', '=', clientId)
            .executeTakeFirst()
        )?.api_version ?? null,
    }),
    verifier: new TokenVerifier({
      issuer: () => knownUrl(config, 'auth') ?? '',
      keys,
      clock,
      cacheSize: config.tokenCacheSize,
      sessions: sessionLiveness,
      connections: connectionLiveness,
    }),
    versions: o.versions ?? releasedVersions,
    limiters: o.limiters ?? (redis ? redisLimiters(redis.client) : memoryLimiters),
    readiness: () => checkReadiness(store, redis?.client),
    async close() {
      await redis?.close();
      await store.close();
    },
  };
  return ctx;
}

/** How long readiness waits for each dependency before calling it down. */
const READINESS_TIMEOUT_MS = 2000;

/** Each dependency answers a trivial request within the bound, or is down. */
async function checkReadiness(store: Store, redis: Redis | undefined): Promise<Readiness> {
  const within = <T>(work: Promise<T>) =>
    Promise.race([
      work.then(() => 'up' as const),
      new Promise<'down'>((resolve) => setTimeout(() => resolve('down'), READINESS_TIMEOUT_MS).unref()),
    ]).catch(() => 'down' as const);
  const [database, cache] = await Promise.all([
    within(sql`select 1`.execute(store.db)),
    redis ? within(redis.ping()) : undefined,
  ]);
  const checks: Readiness['checks'] = { database, ...(cache ? { redis: cache } : {}) };
  return { ready: Object.values(checks).every((c) => c === 'up'), checks };
}

/**
 * GET /ready on every host, for a load balancer: 200 when this instance's dependencies answer, else 503 naming the
 * one that does not. GET /health stays liveness only (the process serves).
 */
function readinessRoute(app: FastifyInstance, ctx: AppContext): void {
  app.get('/ready', async (_request, reply) => {
    const { ready, checks } = await ctx.readiness();
    return reply
      .code(ready ? 200 : 503)
      .header('cache-control', 'no-store')
      .headers(ready ? {} : { 'retry-after': '5' })
      .send({ status: ready ? 'ready' : 'unavailable', checks });
  });
}

async function listen(ctx: AppContext, surface: Surface, module: SurfaceModule): Promise<FastifyInstance> {
  const { config } = ctx;
  const app = createServer(config, { surface, logger: ctx.log, ...module.serverOptions?.(ctx) });
  readinessRoute(app, ctx);
  await app.register(async (scope) => module.plugin(scope, ctx));
  await app.listen({ host: config.host, port: config.ports[surface] });
  const { port } = app.server.address() as AddressInfo;
  const url = publishBinding(config, surface, port);
  ctx.log.info({ surface, url, listen: `${config.host}:${port}` }, 'listening');
  return app;
}

/** Stops accepting, lets in-flight requests finish, then closes the database. */
async function shutdown(ctx: AppContext, servers: Partial<Record<Surface, FastifyInstance>>): Promise<void> {
  await Promise.allSettled(Object.values(servers).map((s) => s.close()));
  await ctx.close();
}
