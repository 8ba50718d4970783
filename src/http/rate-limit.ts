import { Redis } from 'ioredis';
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  type RateLimiterRes,
} from 'rate-limiter-flexible';

export interface LimitSpec {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
}

/** A limiter factory: in memory by default; the app swaps in a Redis-backed one when REDIS_URL is set. */
export type LimiterFactory = (spec: LimitSpec) => RateLimiterAbstract;

export const memoryLimiters: LimiterFactory = (s) =>
  new RateLimiterMemory({ keyPrefix: s.keyPrefix, points: s.points, duration: s.durationSeconds });

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

/** Connects to Redis for the rate limiters; `close` quits the connection at shutdown. */
export function connectRedis(url: string): { client: Redis; close(): Promise<void> } {
  const client = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false });
  client.on('error', () => {}); // reconnects by itself; the insurance limiter covers the gap
  return { client, close: async () => void (await client.quit().catch(() => client.disconnect())) };
}
