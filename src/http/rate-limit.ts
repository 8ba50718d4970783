import { Redis } from 'ioredis';
import type { DependencyWatch } from './dependency-outage.js';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible';

export interface LimitSpec {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
}

/** How long a Redis connect or command may take before the rate limits use memory instead. */
export const REDIS_TIMEOUT_MS = 500;

/** A limiter factory: in memory by default; the app swaps in a Redis-backed one when REDIS_URL is set. */
export type LimiterFactory = (spec: LimitSpec) => RateLimiterAbstract;

export const memoryLimiters: LimiterFactory = (s) =>
  new RateLimiterMemory({ keyPrefix: s.keyPrefix, points: s.points, duration: s.durationSeconds });

/** The same limiters, each refusal (a `RateLimiterRes` rejection of `consume`) reported by the limiter's key prefix. */
export function countRefusals(factory: LimiterFactory, refused: (limit: string) => void): LimiterFactory {
  return (spec) => {
    const limiter = factory(spec);
    const consume = limiter.consume.bind(limiter);
    limiter.consume = (key, points, options) =>
      consume(key, points, options).catch((e: unknown) => {
        if (e instanceof RateLimiterRes) refused(spec.keyPrefix);
        throw e;
      });
    return limiter;
  };
}

/** Seconds until a refused caller may try again, at least 1 (the `Retry-After` value, RFC 9110 §10.2.3). */
export function retryAfterSeconds(res: RateLimiterRes): number {
  return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
}

/**
 * Limiters whose counters live in Redis, so that every instance counts against the same limit. If Redis is
 * unreachable, requests are limited by an in-memory fallback rather than let through unlimited or refused outright.
 */
export function redisLimiters(client: Redis): LimiterFactory {
  return (s) =>
    new RateLimiterRedis({
      storeClient: client,
      keyPrefix: `svc:${s.keyPrefix}`,
      points: s.points,
      duration: s.durationSeconds,
      insuranceLimiter: memoryLimiters(s) as RateLimiterMemory,
    });
}

/**
 * Connects to Redis for the rate limiters; `close` quits the connection at shutdown. Every wait is bounded (connect
 * and each command within REDIS_TIMEOUT_MS, no offline queue), and an outage is logged once when it starts (rate
 * limits then fall back to this instance's memory) and once when Redis answers again.
 */
export function connectRedis(
  url: string,
  watch: DependencyWatch,
  timeoutMs = REDIS_TIMEOUT_MS,
): { client: Redis; close(): Promise<void> } {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
  });
  // ioredis reconnects by itself; meanwhile the insurance limiter (memory) counts.
  client.on('error', (e) => watch.failed(e));
  client.on('ready', () => watch.succeeded());
  return { client, close: async () => void (await client.quit().catch(() => client.disconnect())) };
}
