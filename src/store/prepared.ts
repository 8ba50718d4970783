import type SQLite from 'better-sqlite3';
import type { Kysely } from 'kysely';
import type pg from 'pg';
import { afterTurnAnswers } from '../base/turn-end.js';
import { whileBusy } from './busy.js';
import { coalesced, type CoalescedStatement } from './coalesce.js';
import type { Database } from './schema.js';

/**
 * Hot-path SQL: fixed statement texts, prepared once (per connection on PostgreSQL) and run without Kysely's query
 * building, which was a quarter of the CPU of a refresh rotation on the embedded database (bench/refresh.mjs profile:
 * `visitNode`, `freeze`, the compilers and the driver's promise chain). Texts use `$1, $2...` placeholders on both
 * engines. Everything else keeps using Kysely; this is for the few statements that run on every request.
 */
export type PreparedSql = SqlitePrepared | PostgresPrepared;

interface Common {
  /** The rows of one statement (a SELECT, or a write with RETURNING). */
  rows<R>(text: string, params: readonly unknown[]): Promise<R[]>;
  /** How many rows one write changed. */
  changes(text: string, params: readonly unknown[]): Promise<number>;
}

/** Synchronous use of the embedded database, inside `atomically`. */
export interface SyncSql {
  rows<R>(text: string, params: readonly unknown[]): R[];
  changes(text: string, params: readonly unknown[]): number;
}

export interface SqlitePrepared extends Common {
  engine: 'sqlite';
  /**
   * Runs `fn` synchronously in one `BEGIN IMMEDIATE` transaction: atomic, and the write lock is held for the few
   * microseconds of `fn` only, never across an await.
   */
  atomically<T>(fn: (sql: SyncSql) => T): Promise<T>;
}

export interface PostgresPrepared extends Common {
  engine: 'postgres';
  /** The pool's connections: how many statements can run at once. */
  connections: number;
  /** How long a query may wait for one of them (DATABASE_CONNECT_TIMEOUT_MS; 0: no bound). */
  connectTimeoutMs: number;
  /**
   * One statement shared by the calls that wait for it (store/coalesce.ts), within the pool's bounds: at most
   * `connections` of its statements in flight, and a call waits at most `connectTimeoutMs`, as for a connection; a
   * call that waited longer is an outage the store's watch is told of, as a connection that never came would be.
   */
  shared<I, R>(statement: SharedStatement<I, R>): (item: I) => Promise<R>;
}

/** A shared statement as its caller describes it; the pool's bounds are the store's (`PostgresPrepared.shared`). */
export type SharedStatement<I, R> = Omit<CoalescedStatement<I, R>, 'waitTimeoutMs' | 'waitedTooLong'>;

/**
 * Told of every statement's outcome, by Kysely's log and by the statements here alike, so that an outage and its end
 * are noticed (and logged) once; `wrote` says the statement wrote (a full disk refuses writes and serves reads).
 */
export interface Outcomes {
  failed(error: unknown): void;
  succeeded(wrote: boolean): void;
}

const NO_WATCH: Outcomes = { failed: () => {}, succeeded: () => {} };

/**
 * Whether a statement's text writes (or commits what a transaction wrote), for the watch: the texts are the code's
 * own, and a word boundary keeps `updated_at` from reading as a write.
 */
export function writes(text: string): boolean {
  return WRITING.test(text);
}
const WRITING = /^\s*commit\b|\b(insert|update|delete)\b/i;

/**
 * Runs `work` and tells the watch how it ended. A synchronous `work` (a statement on the embedded database) is handed
 * back settled, without an async function and its promises around it: the agency call runs two statements.
 */
function watched<T>(watch: Outcomes, work: () => T | Promise<T>, wrote: boolean): Promise<T> {
  let result: T | Promise<T>;
  try {
    result = work();
  } catch (e) {
    watch.failed(e);
    return Promise.reject(e as Error);
  }
  if (!(result instanceof Promise)) {
    watch.succeeded(wrote);
    return Promise.resolve(result);
  }
  return result.then(
    (value) => {
      watch.succeeded(wrote);
      return value;
    },
    (e: unknown) => {
      watch.failed(e);
      throw e;
    },
  );
}

/**
 * One read transaction shared by the prepared reads of one turn of the event loop on the embedded database. A read
 * run alone is a transaction of its own, and starting and ending one (the WAL read lock taken and released, two
 * system calls) cost more than the read: a point read measured 13–21 µs alone under load here, and a write statement
 * inside a transaction 2–4 µs. So the first read of a turn opens a deferred transaction, the reads that follow in the
 * same turn (other requests' included) run in it, and it ends when the turn does (after the turn's answers:
 * base/turn-end.ts), or sooner, before
 * anything writes: a write, a group commit and every statement Kysely runs end it first, so no write ever joins it
 * and this process always reads its own writes. A read sees the database as of the turn's first read: another
 * process's commit made during that turn shows from the next one.
 */
export class SharedRead {
  private open = false;
  private readonly begin: SQLite.Statement;
  private readonly commit: SQLite.Statement;
  private readonly rollback: SQLite.Statement;
  private readonly endAtTurnEnd = () => this.end();

  constructor(private readonly database: SQLite.Database) {
    this.begin = database.prepare('BEGIN DEFERRED');
    this.commit = database.prepare('COMMIT');
    this.rollback = database.prepare('ROLLBACK');
  }

  /** Whether the open transaction, if any, is this shared read (else it is Kysely's, or none is open). */
  get isOpen(): boolean {
    return this.open;
  }

  /** Runs the read-only `fn` in the turn's shared read, opening it if needed; no other transaction may be open. */
  run<T>(fn: () => T): T {
    if (!this.open) {
      this.begin.run();
      this.open = true;
      afterTurnAnswers(this.endAtTurnEnd);
    }
    return fn();
  }

  /**
   * Ends the shared read, if open. It wrote nothing, so its end cannot fail but on a closed connection; it runs from
   * a microtask at the turn's end too, where a throw would end the process.
   */
  end(): void {
    if (!this.open) return;
    this.open = false;
    if (!this.database.open || !this.database.inTransaction) return;
    try {
      this.commit.run();
    } catch {
      this.rollback.run();
    }
  }
}

/** How long a statement waits for the write lock another process holds, by default (DATABASE_CONNECT_TIMEOUT_MS). */
export const DEFAULT_LOCK_WAIT_MS = 5000;

/**
 * The embedded database shares one connection with Kysely. Kysely holds it across awaits during a transaction, and a
 * statement run on it then would join that transaction, so statements run at once only while no Kysely transaction
 * is open, and otherwise wait for Kysely's connection (its mutex is released when the transaction ends). Read-only
 * statements run in the turn's shared read; any other ends it first and commits on its own.
 */
export function sqlitePrepared(
  database: SQLite.Database,
  prepare: (sql: string) => SQLite.Statement,
  kysely: Kysely<Database>,
  shared: SharedRead,
  watch: Outcomes = NO_WATCH,
  lockWaitMs = DEFAULT_LOCK_WAIT_MS,
): SqlitePrepared {
  const statements = new Map<string, OwnStatement>();
  const statement = (text: string): OwnStatement => {
    let own = statements.get(text);
    if (!own) {
      const s = prepare(positional(text));
      own = {
        statement: s,
        columns: s.reader
          ? s
              .raw(true)
              .columns()
              .map((c) => c.name)
          : [],
      };
      statements.set(text, own);
    }
    return own;
  };
  const rowsOf = <R>(own: OwnStatement, params: readonly unknown[]): R[] =>
    objectsOf<R>(own.columns, own.statement.all(...params) as unknown[][]);
  const sync: SyncSql = {
    rows: (text, params) => rowsOf(statement(text), params),
    changes: (text, params) => statement(text).statement.run(...params).changes,
  };
  // Every statement here is one outside a transaction, or a group commit that begins with `BEGIN IMMEDIATE`: safe to
  // try again when another process holds the write lock, and waited for on a timer (busy.ts). Behind a Kysely
  // transaction it waits holding Kysely's connection: that transaction already had the lock, so only a process that
  // took it in between can make it wait.
  const exclusive = <T>(fn: () => T, wrote: boolean): Promise<T> =>
    watched(
      watch,
      () =>
        database.inTransaction && !shared.isOpen
          ? kysely.connection().execute(async () => whileBusy(fn, lockWaitMs))
          : whileBusy(fn, lockWaitMs),
      wrote,
    );
  /** A write with RETURNING is not read-only: it commits on its own, as every write does. */
  const rowsOutsideTransactions = <R>(own: OwnStatement, params: readonly unknown[]): R[] => {
    if (own.statement.readonly) return shared.run(() => rowsOf<R>(own, params));
    shared.end();
    return rowsOf<R>(own, params);
  };
  return {
    engine: 'sqlite',
    rows: (text, params) => {
      // SQLite knows whether a prepared statement writes; a text's first use prepares it inside the watch, so that a
      // failure to prepare rejects (and is heard) like any other, and is judged by its text until then.
      const own = statements.get(text);
      return exclusive(
        () => rowsOutsideTransactions(own ?? statement(text), params),
        own ? !own.statement.readonly : writes(text),
      );
    },
    changes: (text, params) =>
      exclusive(() => {
        shared.end();
        return sync.changes(text, params);
      }, true),
    atomically: groupCommit(database, sync, shared, exclusive),
  };
}

/**
 * A statement of this module, prepared by it and never handed to Kysely (which expects rows as objects): one that
 * returns rows runs in raw mode, and `columns` names what its arrays hold.
 */
interface OwnStatement {
  statement: SQLite.Statement;
  columns: readonly string[];
}

/**
 * Rows as objects keyed by column name (the last of two equal names wins, as in better-sqlite3's own), built from the
 * arrays of raw mode. better-sqlite3 builds its row objects through V8's API one property at a time: the two reads of
 * an agency tool call cost ~13.5 µs that way with the CPU's caches cold, ~10 with their rows built here.
 */
function objectsOf<R>(columns: readonly string[], raws: readonly unknown[][]): R[] {
  const rows = new Array<R>(raws.length);
  for (let r = 0; r < raws.length; r++) {
    const raw = raws[r]!;
    const row: Record<string, unknown> = {};
    for (let c = 0; c < columns.length; c++) row[columns[c]!] = raw[c];
    rows[r] = row as R;
  }
  return rows;
}

interface Pending {
  fn: (sql: SyncSql) => unknown;
  resolve(value: unknown): void;
  reject(error: unknown): void;
}

/** How one unit of a group commit ended: its value, or what it threw (its savepoint then rolled back). */
type Outcome = { ok: true; value: unknown } | { ok: false; value: unknown };

/**
 * Group commit: the atomic units asked for in one turn of the event loop (the rotations of the requests that arrived
 * together) run in one transaction, each in its own savepoint, so one unit that throws undoes only its own writes
 * (one whose error rolled back the whole transaction fails the group). A commit costs about as much as the writes it
 * makes durable — a rotation alone cost 61 CPU µs here, in groups of five 36 — and every unit still answers only after
 * the commit that made it durable. The group runs at the turn's end after the answers that wait for it there
 * (base/turn-end.ts), so the turn's other answers are not held behind its sync.
 *
 * The two transaction functions are made once: better-sqlite3's `transaction()` builds four wrapper functions and
 * defines five properties on each, and made per group and per unit it was 9 % of the bytes a refresh rotation
 * allocated (`BENCH_HEAP_PROF` at 20 chains), which the young generation's collections then paid for.
 */
function groupCommit(
  database: SQLite.Database,
  sync: SyncSql,
  shared: SharedRead,
  exclusive: <T>(fn: () => T, wrote: boolean) => Promise<T>,
): SqlitePrepared['atomically'] {
  // Called inside the group's transaction, better-sqlite3 runs it in a savepoint.
  const inSavepoint = database.transaction((unit: Pending) => unit.fn(sync));
  const inOneTransaction = database.transaction((group: Pending[]) =>
    group.map((unit): Outcome => {
      try {
        return { ok: true, value: inSavepoint(unit) };
      } catch (e) {
        // On SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY or SQLITE_NOMEM, SQLite may roll back the whole transaction, not
        // only the statement (lang_transaction.html): the units before this one are undone, and a unit after it
        // would begin a transaction of its own and commit while its answer said the group failed. The group fails.
        if (!database.inTransaction) throw e;
        return { ok: false, value: e };
      }
    }),
  ).immediate;
  let queue: Pending[] = [];
  const flush = () => {
    const group = queue;
    queue = [];
    const run = () => {
      // Begun inside the shared read, the group would be a savepoint of it, committed only when the turn ends.
      shared.end();
      return inOneTransaction(group);
    };
    exclusive(run, true).then(
      (outcomes) => group.forEach((u, i) => (outcomes[i]!.ok ? u.resolve : u.reject)(outcomes[i]!.value)),
      (e: unknown) => group.forEach((u) => u.reject(e)),
    );
  };
  return <T>(fn: (sql: SyncSql) => T) =>
    new Promise<T>((resolve, reject) => {
      if (queue.length === 0) afterTurnAnswers(flush);
      queue.push({ fn, resolve: resolve as (value: unknown) => void, reject });
    });
}

/**
 * `$1, $2...` → `?`: better-sqlite3 binds an array to anonymous parameters only, so on SQLite each placeholder must
 * appear once, in order (checked here, at the first use of the text).
 */
function positional(text: string): string {
  let expected = 1;
  return text.replace(/\$(\d+)/g, (_match, n: string) => {
    if (Number(n) !== expected++) throw new Error(`SQLite statement placeholders out of order: ${text}`);
    return '?';
  });
}

/**
 * Named statements: node-postgres parses and plans each once per pooled connection, then only binds and runs it.
 * Unnamed (`named: false`) behind a pooler in transaction mode: a statement named on one server connection is unknown
 * on the next, or already known there by another client's (PgBouncer 1.18: "prepared statement \"svc_1\" already
 * exists", 500s on most requests), so each is parsed where it runs.
 */
export function postgresPrepared(
  pool: pg.Pool,
  watch: Outcomes = NO_WATCH,
  o: { named: boolean } = { named: true },
): PostgresPrepared {
  const known = new Map<string, { name: string | undefined; writes: boolean }>();
  const statementOf = (text: string) => {
    let statement = known.get(text);
    if (!statement) {
      statement = { name: o.named ? `svc_${known.size + 1}` : undefined, writes: writes(text) };
      known.set(text, statement);
    }
    return statement;
  };
  const query = (text: string, params: readonly unknown[]) => {
    const { name, writes } = statementOf(text);
    // node-postgres sends a statement without a name unnamed: parsed where it runs.
    return watched(watch, () => pool.query({ name, text, values: params as unknown[] }), writes);
  };
  return {
    engine: 'postgres',
    connections: pool.options.max ?? 10,
    connectTimeoutMs: pool.options.connectionTimeoutMillis ?? 0,
    // `this`, not the pool's options: what a caller sees as the bounds is what it gets (the tests narrow them).
    shared(statement) {
      return coalesced({
        ...statement,
        concurrency: Math.min(statement.concurrency, this.connections),
        waitTimeoutMs: this.connectTimeoutMs,
        waitedTooLong: (error) => watch.failed(error),
      });
    },
    rows: async <R>(text: string, params: readonly unknown[]) => (await query(text, params)).rows as R[],
    changes: async (text, params) => (await query(text, params)).rowCount ?? 0,
  };
}
