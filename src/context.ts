import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { type Config, type Surface, urlOf } from './config/config.js';
import type { Clock } from './domain/clock.js';
import type { UserRow } from './domain/users.js';
import type { LimiterFactory } from './http/rate-limit.js';
import type { CachedLookup } from './store/cached-lookup.js';
import type { Store } from './store/database.js';
import type { Database } from './store/schema.js';
import type { LivenessCache } from './tokens/liveness.js';
import type { SigningKeys } from './tokens/signing-keys.js';
import type { TokenVerifier } from './tokens/verifier.js';
import type { VersionRegistry } from './versions/registry.js';

/** What every surface shares: built once per process by `app.ts` and handed to each surface plugin. */
export interface AppContext {
  config: Config;
  store: Store;
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  keys: SigningKeys;
  verifier: TokenVerifier;
  sessionLiveness: LivenessCache;
  /** Liveness of connections (OAuth grants); call `forget(id)` after revoking or narrowing one here. */
  connectionLiveness: LivenessCache;
  /** User rows by id, for the per-request profile reads (GET /me, get_me); stale for at most LIVENESS_CACHE_SECONDS. */
  users: CachedLookup<UserRow | undefined>;
  /** OAuth clients' pinned API versions (SPEC §9.3), by client id; same staleness bound as `users`. */
  clientPins: CachedLookup<string | null>;
  versions: VersionRegistry;
  limiters: LimiterFactory;
  /** Readiness of this instance's dependencies (GET /ready): the database, and Redis when configured. */
  readiness(): Promise<Readiness>;
  /** Closes what the context opened: the store, and Redis when configured. */
  close(): Promise<void>;
}

export interface Readiness {
  ready: boolean;
  checks: Record<string, 'up' | 'down'>;
}

/** Public URLs of the surfaces and of the resources they protect (RFC 8707 resource indicators). */
export const urls = {
  issuer: (c: Config) => urlOf(c, 'auth'),
  api: (c: Config) => urlOf(c, 'api'),
  mcpResource: (c: Config) => `${urlOf(c, 'mcp')}/mcp`,
  agencyMcpResource: (c: Config) => `${urlOf(c, 'agency-mcp')}/mcp`,
  of: (c: Config, s: Surface) => urlOf(c, s),
};
