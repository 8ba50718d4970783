import type { Clock } from '../base/clock.js';
import { isBusy } from '../store/busy.js';
import { StatementWaitTimeout } from '../store/coalesce.js';
import { isDiskFull, isPostgresUnavailable, isReadOnly } from '../store/pg-errors.js';
import type { FastifyBaseLogger } from 'fastify';

/** Seconds a client is told to wait when a dependency is down (RFC 9110 §10.2.3 `Retry-After`). */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/**
 * Node's codes for a connection that could not be made or was lost: refused, reset, timed out, no route (the host's or
 * the network's), the name not found or its resolver failing for now (EAI_AGAIN: a DNS server that stalls while a pool
 * opens a connection), no local port or file descriptor left to make one with.
 */
const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EADDRNOTAVAIL',
  'EMFILE',
  'ENFILE',
]);
/** node-postgres and ioredis report lost or slow connections in messages only. */
const UNAVAILABLE_MESSAGES =
  /Connection terminated|timeout exceeded when trying to connect|Query read timeout|not queryable|Stream isn't writeable|Connection is closed|Command timed out/i;

/** A dependency (another instance's authorization server, say) answered that it cannot serve now, or is unreachable. */
export class DependencyUnavailable extends Error {
  override name = 'DependencyUnavailable';
}

/**
 * Whether an error means a dependency (PostgreSQL, SQLite's lock, Redis) could not serve in time, or the database
 * refused a write it cannot make now (`refusesWrites`) — an outage, not a bug: every surface answers it 503 with
 * Retry-After in its own shape, and the log says so once, not per request.
 */
export function isDependencyOutage(error: unknown): boolean {
  if (typeof error !== 'object' || error === null) return false;
  if (error instanceof DependencyUnavailable || error instanceof StatementWaitTimeout) return true;
  if (refusesWrites(error)) return true;
  const e = error as { code?: unknown; message?: unknown };
  const code = typeof e.code === 'string' ? e.code : '';
  if (isPostgresUnavailable(code) || NETWORK_CODES.has(code) || isBusy(error)) return true;
  return typeof e.message === 'string' && UNAVAILABLE_MESSAGES.test(e.message);
}

/**
 * Whether the database refused a write that it cannot make now, while it goes on serving reads: for want of space
 * (SQLite's `SQLITE_FULL`, "database or disk is full": the disk, or past `max_page_count`; PostgreSQL's 53100
 * `disk_full`), or because it is read-only (PostgreSQL's 25006 `read_only_sql_transaction`: a standby, or a primary a
 * failover demoted that a connection still reaches; SQLite's `SQLITE_READONLY`: a file or a file system made
 * read-only). The write was undone. `WritesWatch` follows this state, not the database's `DependencyWatch`.
 */
export function refusesWrites(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && (code === 'SQLITE_FULL' || code.startsWith('SQLITE_READONLY'))) return true;
  return isDiskFull(error) || isReadOnly(error);
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
    // A database that refuses writes serves reads: up and down on every other request here (`WritesWatch`'s).
    if (this.down || !isDependencyOutage(error) || refusesWrites(error)) return;
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

/**
 * How long writes must go on without one refused before the database is said to accept them again. Near a full disk
 * SQLite still fits some commits into log pages it holds, between refused ones (on a tmpfs filled by hand, 70 of the
 * first 250 rotations were refused, scattered among 180 that fitted; then every one): an "again" at each would be a
 * pair of lines per request.
 */
export const WRITES_SETTLE_MS = 10_000;

/**
 * Whether the database accepts writes: the outage of a full disk or a read-only server, which refuses writes and
 * serves reads (`refusesWrites`; `DependencyWatch` leaves it alone). One warning when the first write is refused; one
 * line when a write succeeds with none refused for `WRITES_SETTLE_MS`. Reported as
 * `svc_dependency_up{dependency="database_writes"}`.
 */
export class WritesWatch {
  private refusing = false;
  /** On the monotonic clock (base/clock.ts). */
  private lastRefusedAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly name: string,
    private readonly log: FastifyBaseLogger,
    private readonly clock: Clock,
  ) {}

  get available(): boolean {
    return !this.refusing;
  }

  refused(error: unknown): void {
    this.lastRefusedAt = this.clock.monotonic();
    if (this.refusing) return;
    this.refusing = true;
    const e = error as { code?: unknown; message?: unknown };
    this.log.warn({ dependency: this.name, code: e.code, reason: e.message }, `${this.name} refuses writes`);
  }

  wrote(): void {
    if (!this.refusing || this.clock.monotonic() - this.lastRefusedAt < WRITES_SETTLE_MS) return;
    this.refusing = false;
    this.log.info({ dependency: this.name }, `${this.name} accepts writes again`);
  }
}
