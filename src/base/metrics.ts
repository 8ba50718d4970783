/**
 * What the service counts for the operator (docs/deployment.md#metrics), as the narrow interfaces each layer is handed.
 * The composition root builds the Prometheus implementation (`http/metrics.ts`, one registry per instance) when
 * METRICS_PORT is set, and `NO_METRICS` otherwise: no layer imports prom-client or reaches a global registry, and a
 * process without metrics pays nothing on its hot paths.
 */

/** Hits and misses of one cache. */
export interface CacheCounter {
  lookup(hit: boolean): void;
}

/** How a refresh-token presentation ended (docs/contract.md#tokens). */
export const REFRESH_OUTCOMES = ['rotated', 'grace_replay', 'reuse_detected'] as const;
export type RefreshOutcome = (typeof REFRESH_OUTCOMES)[number];

/** Anything that knows whether its dependency is up: a `DependencyWatch`. */
export interface DependencyState {
  readonly available: boolean;
}

export interface Metrics {
  /** One answered HTTP request; `route` is the route pattern (bounded), never the raw path. */
  httpRequest(
    surface: string,
    method: string,
    route: string | undefined,
    status: number,
    seconds: number,
  ): void;
  /**
   * A request Node's parser refused before it existed (400 bad syntax, 408 too slow, 431 headers too large): it has no
   * method or route to label it with, nor a start to time it from.
   */
  unparsedRequest(surface: string, status: number): void;
  /** The verified-token cache (signature, issuer, type and times checked once per token). */
  readonly tokenCache: CacheCounter;
  readonly sessionLiveness: CacheCounter;
  readonly connectionLiveness: CacheCounter;
  readonly users: CacheCounter;
  refresh(outcome: RefreshOutcome): void;
  /** Connections ended, by the reason stored on the row (`REVOKE_REASONS` in domain/connections.ts). */
  connectionRevoked(reason: string, count?: number): void;
  /** A request refused by a rate limit, by the limiter's key prefix (`signin-ip`, `dcr-ip`...). */
  rateLimited(limit: string): void;
  /** Reports a dependency as `svc_dependency_up{dependency=name}`, read from its watch when scraped. */
  observeDependency(name: string, state: DependencyState): void;
}

const NO_COUNT: CacheCounter = { lookup: () => {} };

/** Counts nothing: what every layer gets when METRICS_PORT is unset. */
export const NO_METRICS: Metrics = {
  httpRequest: () => {},
  unparsedRequest: () => {},
  tokenCache: NO_COUNT,
  sessionLiveness: NO_COUNT,
  connectionLiveness: NO_COUNT,
  users: NO_COUNT,
  refresh: () => {},
  connectionRevoked: () => {},
  rateLimited: () => {},
  observeDependency: () => {},
};
