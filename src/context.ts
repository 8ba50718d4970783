import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { Config } from './config/config.js';
import type { Clock } from './base/clock.js';
import type { Metrics } from './base/metrics.js';
import type { UserRow } from './domain/users.js';
import type { LimiterFactory } from './http/rate-limit.js';
import type { CachedLookup } from './store/cached-lookup.js';
import type { Store } from './store/database.js';
import type { Database } from './store/schema.js';
import type { LivenessCache } from './tokens/liveness.js';
import type { SigningKeys } from './tokens/signing-keys.js';
import type { TokenVerifier } from './tokens/verifier.js';
import type { VersionRegistry } from './versions/registry.js';
import type { WebSessions } from './web/web-session.js';

/** What every surface shares: built once per process by `app.ts` and handed to each surface plugin. */
export interface AppContext {
  config: Config;
  store: Store;
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  /** What the operator scrapes on METRICS_PORT; counts nothing when it is unset. */
  metrics: Metrics;
  keys: SigningKeys;
  verifier: TokenVerifier;
  sessionLiveness: LivenessCache;
  /** Liveness of connections (OAuth grants); call `forget(id)` after revoking or narrowing one here. */
  connectionLiveness: LivenessCache;
  /** User rows by id, for the per-request profile reads (GET /me, get_me); stale for at most LIVENESS_CACHE_SECONDS. */
  users: CachedLookup<UserRow | undefined>;
  /** OAuth clients' pinned API versions (docs/contract.md#versioning), by client id; same staleness bound as `users`. */
  clientPins: CachedLookup<string | null>;
  versions: VersionRegistry;
  /** The browser session cookie and CSRF protection of the authorization server's pages. */
  webSessions: WebSessions;
  limiters: LimiterFactory;
  /** Readiness of this instance (GET /ready): its database answers; writes and Redis are reported beside it. */
  readiness(): Promise<Readiness>;
  /** Closes what the context opened: the store, and Redis when configured. */
  close(): Promise<void>;
}

export interface Readiness {
  /**
   * `ready` with every dependency up; `degraded` when Redis is down (the rate limits count in memory) or the database
   * refuses writes (reads go on), the instance serving meanwhile; `unavailable` when the database does not answer.
   */
  status: 'ready' | 'degraded' | 'unavailable';
  checks: Record<string, 'up' | 'down'>;
}

/** Kept here so surfaces can import both from one place; core modules import `config/urls.js`. */
export { publicPath, urls } from './config/urls.js';
