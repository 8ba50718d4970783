import { Redis } from 'ioredis';
import { DependencyUnavailable, type DependencyWatch, isDependencyOutage } from './dependency-outage.js';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';

export interface LimitSpec {
  keyPrefix: string;
  points: number;
  durationSeconds: number;
}

/** How long a Redis connect or command may take before the rate limits use memory instead. */
export const REDIS_TIMEOUT_MS = 500;

/**
 * How long a new connection's handshake (ioredis's own commands: CLIENT SETINFO, the ready check's INFO) may go
 * unanswered before the connection is made again.
 */
export const REDIS_HANDSHAKE_TIMEOUT_MS = 2000;

/** What the routes use of a limiter; a refusal rejects with a `RateLimiterRes`. */
export interface Limiter {
  consume(key: string, points?: number): Promise<RateLimiterRes>;
  reward(key: string, points?: number): Promise<RateLimiterRes>;
  delete(key: string): Promise<boolean>;
}

/** A limiter factory: in memory by default; the app swaps in a Redis-backed one when REDIS_URL is set. */
export type LimiterFactory = (spec: LimitSpec) => Limiter;

export const memoryLimiters: LimiterFactory = (s) =>
  new RateLimiterMemory({ keyPrefix: s.keyPrefix, points: s.points, duration: s.durationSeconds });

/** The same limiters, each refusal (a `RateLimiterRes` rejection of `consume`) reported by the limiter's key prefix. */
export function countRefusals(factory: LimiterFactory, refused: (limit: string) => void): LimiterFactory {
  return (spec) => {
    const limiter = factory(spec);
    return {
      consume: (key, points) =>
        limiter.consume(key, points).catch((e: unknown) => {
          if (e instanceof RateLimiterRes) refused(spec.keyPrefix);
          throw e;
        }),
      reward: (key, points) => limiter.reward(key, points),
      delete: (key) => limiter.delete(key),
    };
  };
}

/** Seconds until a refused caller may try again, at least 1 (the `Retry-After` value, RFC 9110 §10.2.3). */
export function retryAfterSeconds(res: RateLimiterRes): number {
  return Math.max(1, Math.ceil(res.msBeforeNext / 1000));
}

/** Redis for the rate limits, with what the limiters need to know of its health. */
export interface RedisConnection {
  client: Redis;
  /** Whether commands may be sent now: connected, and not found unresponsive since. */
  readonly ready: boolean;
  /** A command sent on `client`, rejected (an outage) if Redis has not answered it within the bound. */
  answered<T>(command: Promise<T>): Promise<T>;
  /**
   * A command failed: logged once per outage, a refusal (`READONLY`, `OOM`) as much as a lost connection; an
   * unresponsive connection is dropped so the next uses memory.
   */
  failed(error: unknown): void;
  /** A limit was counted in Redis: the outage, if any, is over. */
  counted(): void;
  close(): Promise<void>;
}

/**
 * Limiters whose counters live in Redis, so that every instance counts against the same limit. While Redis is down
 * or unresponsive, each limiter counts in this instance's memory instead — neither letting requests through
 * unlimited nor refusing them — and a request waits for Redis at most once (REDIS_TIMEOUT_MS): the failure drops
 * the connection, and until it is ready again the limits go straight to memory.
 */
export function redisLimiters(redis: RedisConnection): LimiterFactory {
  return (s) => {
    const shared = new RateLimiterRedis({
      storeClient: redis.client,
      keyPrefix: `svc:${s.keyPrefix}`,
      points: s.points,
      duration: s.durationSeconds,
      rejectIfRedisNotReady: true,
    });
    const local = memoryLimiters(s);
    // Only a `consume` that Redis answered (a refusal is an answer) says Redis is back: under `OOM` Redis still
    // deletes, and a recovery read from that would come and go with every sign-in.
    const run = async <T>(op: (limiter: Limiter) => Promise<T>, consuming = false): Promise<T> => {
      if (!redis.ready) return op(local);
      try {
        const value = await redis.answered(op(shared));
        if (consuming) redis.counted();
        return value;
      } catch (e) {
        if (e instanceof RateLimiterRes) {
          if (consuming) redis.counted();
          throw e;
        }
        redis.failed(e);
        return op(local);
      }
    };
    return {
      consume: (key, points) => run((l) => l.consume(key, points), true),
      reward: (key, points) => run((l) => l.reward(key, points)),
      delete: (key) => run((l) => l.delete(key)),
    };
  };
}

/**
 * Calls `fire` once `ms` have passed and the event loop has then read its sockets: a timer alone, after this process
 * held its own loop past `ms` (a long collection, a synchronous write to a slow disk), fires before the sockets are
 * read, and an answer already waiting in one would be taken for none. `setImmediate` runs after the poll phase
 * (Node's event loop guide). Cleared as a timer is; `fire` checks whether it is still wanted.
 */
function timeoutAfterSocketsRead(ms: number, fire: () => void): NodeJS.Timeout {
  return setTimeout(() => setImmediate(fire), ms);
}

/**
 * `command`, or a rejection once Redis has had `ms` to answer it and has not. Not ioredis's `commandTimeout`, which
 * fires as a plain timer: Redis's answer, waiting while this process held its loop, was taken for an outage, the
 * connection dropped and the limits counted apart on each instance until it came back (a burst across two instances
 * then got past the shared limit).
 */
function answeredWithin<T>(command: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    // A reject after the command settled is a no-op; the timer is cleared then anyway.
    const timer = timeoutAfterSocketsRead(ms, () =>
      reject(new DependencyUnavailable(`Redis did not answer within ${ms} ms`)),
    );
    void command.then(resolve, reject).finally(() => clearTimeout(timer));
  });
}

/**
 * Connects to Redis for the rate limiters; `close` quits the connection at shutdown. Every wait is bounded (connect
 * and each command within REDIS_TIMEOUT_MS of Redis's time, `answered`; a new connection's handshake within
 * REDIS_HANDSHAKE_TIMEOUT_MS; no offline queue), and an outage is logged once when it starts (rate limits then fall
 * back to this instance's memory) and once when Redis counts again.
 *
 * A Redis that answers but refuses the limits' writes is an outage too: `READONLY` from a primary demoted by a
 * failover (its clients keep their connections to it), `OOM` under `maxmemory` with `noeviction`. On `READONLY` the
 * connection is dropped and made again, so that an address that now names the new primary (Sentinel, a managed
 * service's endpoint) is followed. Recovery is read from a count that Redis made, not from a connection being ready:
 * a demoted primary accepts the connection and then refuses again.
 */
export function connectRedis(
  url: string,
  watch: DependencyWatch,
  timeoutMs = REDIS_TIMEOUT_MS,
): RedisConnection {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 1,
    lazyConnect: false,
    connectTimeout: timeoutMs,
    // 1: reconnect, and let the command fail (its limit counts in memory meanwhile).
    reconnectOnError: (e) => (e.message.startsWith('READONLY') ? 1 : false),
  });
  /** Whether the outage, if any, is Redis refusing commands, which a new connection does not end. */
  let refusing = false;
  // ioredis reconnects by itself; meanwhile the limits count in memory. An error event is the connection's, never a
  // command's (those reach the command): a handshake Redis refused — a wrong password (WRONGPASS), a missing one
  // (NOAUTH) — is an outage too, logged in Redis's words (unlogged, the warning said only "reconnecting").
  client.on('error', (e) =>
    watch.failed(
      isDependencyOutage(e) ? e : new DependencyUnavailable(`Redis refused the connection: ${e.message}`),
    ),
  );
  // A connection closed by the server (a restart) is reconnected without any error event: an outage all the same.
  client.on('reconnecting', () => watch.failed(new Error('Connection is closed; reconnecting')));
  // `answered` does not see the handshake's commands, and a server that takes a connection and then answers nothing
  // (gone silent, a route black-holed after the connect) would leave it waiting, and the limits in memory, for good.
  // Timed after a look at the sockets, as `answered` is; the timer of an attempt that closed is cleared with it.
  let handshake: NodeJS.Timeout | undefined;
  client.on('connect', () => {
    clearTimeout(handshake);
    handshake = timeoutAfterSocketsRead(REDIS_HANDSHAKE_TIMEOUT_MS, () => {
      if (client.status === 'connect') client.disconnect(true);
    }).unref();
  });
  client.on('close', () => clearTimeout(handshake));
  client.on('ready', () => {
    clearTimeout(handshake);
    if (!refusing) watch.succeeded();
  });
  return {
    client,
    get ready() {
      return client.status === 'ready';
    },
    answered: (command) => answeredWithin(command, timeoutMs),
    failed(error) {
      if (isDependencyOutage(error)) {
        watch.failed(error);
        // A stalled server keeps the socket open and answers nothing: no error event ever comes, so the connection
        // is dropped here. ioredis reconnects, and is ready again only once Redis answers its handshake.
        if (client.status === 'ready') client.disconnect(true);
        return;
      }
      refusing = true;
      watch.failed(
        new DependencyUnavailable(`Redis refused a rate limit's command: ${(error as Error).message}`),
      );
    },
    counted() {
      refusing = false;
      watch.succeeded();
    },
    // A stalled Redis answers no QUIT either: after the bound, the connection is closed without it.
    close: async () => void (await answeredWithin(client.quit(), timeoutMs).catch(() => client.disconnect())),
  };
}
