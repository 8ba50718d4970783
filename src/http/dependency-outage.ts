import { StatementWaitTimeout } from '../store/coalesce.js';
import { isPostgresUnavailable } from '../store/pg-errors.js';
import type { FastifyBaseLogger } from 'fastify';

/** Seconds a client is told to wait when a dependency is down (RFC 9110 §10.2.3 `Retry-After`). */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);
/** node-postgres and ioredis report lost or slow connections in messages only. */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Stream isn't writeable|Connection is closed|Command timed out/i;

/** A dependency (another instance's authorization server, say) answered that it cannot serve now, or is unreachable. */
export class DependencyUnavailable extends Error {
  override name = 'DependencyUnavailable';
}

/**
 * Whether an error means a dependency (PostgreSQL, SQLite's lock, Redis) could not serve in time — an outage, not a
 * bug: every surface answers it 503 with Retry-After in its own shape, and the log says so once, not per request.
 */
export function isDependencyOutage(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if (error instanceof DependencyUnavailable || error instanceof StatementWaitTimeout) return true;
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (isPostgresUnavailable(code) || NETWORK_CODES.has(code) || code === 'SQLITE_BUSY') return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message);
}

/**
 * Up/down state of one dependency, logged on change only: one warning when it goes down (with the first error), one
 * line when it answers again — what an operator needs at 3 a.m., instead of a stack per request.
 */
export class DependencyWatch {
  private down = false;

  constructor(
    private readonly name: string,
    private readonly log: FastifyBaseLogger,
  ) {}

  get available(): boolean {
    return !this.down;
  }

  failed(error: unknown): void {
    if (this.down || !isDependencyOutage(error)) return;
    this.down = true;
    const e = error as { code?: unknown; message?: unknown };
    this.log.warn({ dependency: this.name, code: e.code, reason: e.message }, `${this.name} unavailable`);
  }

  succeeded(): void {
    if (!this.down) return;
    this.down = false;
    this.log.info({ dependency: this.name }, `${this.name} available again`);
  }
}
