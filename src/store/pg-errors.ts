/**
 * What PostgreSQL's errors say (SQLSTATE, PostgreSQL Appendix A), in one place for every layer above: whether the
 * database cannot serve now (http/dependency-outage.ts answers 503), whether it refused a statement for the values it
 * was given (store/coalesce.ts runs a shared statement again item by item), and whether a text value holds a
 * character it cannot store (http/framework-errors.ts answers 400: the request's fault, not a bug).
 */

/** SQLSTATEs that mean "the database cannot serve now", not "this request is wrong". */
const UNAVAILABLE = /^(08|57P0[1-3]|53300|57014)/;

/**
 * Classes that say nothing about what a statement was given: connection exceptions, the transaction's state (25006: a
 * read-only server), insufficient resources (53100: a full disk), operator intervention (a cancel, the statement
 * timeout, a shutdown), system and internal errors.
 */
const NOT_THE_VALUES = new Set(['08', '25', '53', '57', '58', 'XX']);

/** U+0000 in text (`character_not_in_repertoire`), or a character the database's encoding lacks. */
const UNSTORABLE_TEXT = new Set(['22021', '22P05']);

/**
 * The SQLSTATE of an error PostgreSQL reported (node-postgres gives it with a `severity`); undefined for anything
 * else, errors of the connection itself included (a reset socket, a client-side timeout).
 */
function reportedState(error: unknown): string | undefined {
  const e = error as { code?: unknown; severity?: unknown } | null;
  if (typeof e?.severity !== 'string' || typeof e.code !== 'string') return undefined;
  return /^[0-9A-Z]{5}$/.test(e.code) ? e.code : undefined;
}

/** Whether `code` (an error's `code`, whoever set it) is a SQLSTATE of the database being unable to serve now. */
export function isPostgresUnavailable(code: string): boolean {
  return UNAVAILABLE.test(code);
}

/**
 * Whether PostgreSQL refused a statement for the values it was given (a value it cannot take, a constraint, a
 * deadlock or serialization failure): the statement was rolled back whole, and may be run again with other values.
 */
export function isRefusedStatement(error: unknown): boolean {
  const state = reportedState(error);
  return state !== undefined && !NOT_THE_VALUES.has(state.slice(0, 2));
}

/** Whether PostgreSQL refused a text value it cannot store (U+0000, which SQLite stores). */
export function isUnstorableText(error: unknown): boolean {
  const state = reportedState(error);
  return state !== undefined && UNSTORABLE_TEXT.has(state);
}

/** Whether PostgreSQL could not write for want of disk space (`disk_full`): reads go on meanwhile. */
export function isDiskFull(error: unknown): boolean {
  return reportedState(error) === '53100';
}

/**
 * Whether PostgreSQL refused a write because the transaction is read-only (`read_only_sql_transaction`): the server
 * is a standby — a primary a failover demoted, still reached by a connection or an address not yet moved — or
 * `default_transaction_read_only` is set. Reads go on meanwhile.
 */
export function isReadOnly(error: unknown): boolean {
  return reportedState(error) === '25006';
}
