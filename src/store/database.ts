import { setTimeout as sleep } from 'node:timers/promises';
import SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  Kysely,
  PostgresDialect,
  type PostgresPool,
  type PostgresPoolClient,
  SqliteAdapter,
  SqliteDialect,
  SqliteDriver,
} from 'kysely';
import pg from 'pg';
import type { Config } from '../config/config.js';
import { whileBusy } from './busy.js';
import { FALLBACK_AUTOCHECKPOINT_PAGES, startCheckpointer } from './checkpointer.js';
import { prepareEmbeddedFile } from './embedded-file.js';
import { isReadOnly } from './pg-errors.js';
import {
  DEFAULT_LOCK_WAIT_MS,
  type Outcomes,
  type PreparedSql,
  postgresPrepared,
  SharedRead,
  sqlitePrepared,
  writes,
} from './prepared.js';
import type { Database } from './schema.js';

export type Engine = 'sqlite' | 'postgres';

export interface Store {
  db: Kysely<Database>;
  engine: Engine;
  /** PostgreSQL only: the pool's connections now (the embedded database has one in-process connection, no pool). */
  pool?: PoolStats;
  /** The same database for the statements of the hot paths, run without query building (prepared.ts). */
  sql: PreparedSql;
  close(): Promise<void>;
}

/** What a PostgreSQL pool holds at this moment, for the metrics. */
export interface PoolStats {
  readonly totalCount: number;
  readonly idleCount: number;
  /** Requests queued for a connection (each waits at most DATABASE_CONNECT_TIMEOUT_MS). */
  readonly waitingCount: number;
}

const PG_INT8 = 20;

/** Told of every statement's outcome, so that an outage and its end are noticed (and logged) once. */
export type StoreWatch = Outcomes;

type StoreConfig = Pick<Config, 'databaseUrl' | 'dataDir' | 'databasePoolSize'> &
  Partial<
    Pick<Config, 'databaseConnectTimeoutMs' | 'databaseStatementTimeoutMs' | 'databaseTransactionPooler'>
  >;

/** Opens the configured engine: PostgreSQL when DATABASE_URL is set, else a SQLite file in DATA_DIR (WAL). */
export function openStore(config: StoreConfig, watch?: StoreWatch): Store {
  const pool = config.databaseUrl ? postgresPool(config.databaseUrl, config) : undefined;
  const sqlite = pool ? undefined : sqliteFile(config.dataDir);
  // The embedded database: how long a statement waits, off the event loop, for the write lock another process holds.
  const lockWaitMs = config.databaseConnectTimeoutMs ?? DEFAULT_LOCK_WAIT_MS;
  const checkpointer = sqlite && startCheckpointer(sqlite.database.name);
  const dialect = pool
    ? new PostgresDialect({ pool: discardingBrokenClients(pool) })
    : new EmbeddedDialect(sqlite!.database, lockWaitMs);
  const db = new Kysely<Database>({
    dialect,
    ...(watch
      ? {
          log: (event) =>
            event.level === 'error' ? watch.failed(event.error) : watch.succeeded(writes(event.query.sql)),
        }
      : {}),
  });
  const sql = pool
    ? postgresPrepared(pool, watch, { named: !config.databaseTransactionPooler })
    : sqlitePrepared(sqlite!.database, sqlite!.prepare, db, sqlite!.shared, watch, lockWaitMs);
  const close = async () => {
    await checkpointer?.stop();
    sqlite?.shared.end();
    await db.destroy();
  };
  return { db, engine: sql.engine, sql, ...(pool ? { pool } : {}), close };
}

/**
 * Kysely's SQLite dialect, but for two things.
 *
 * SQLite's DDL is transactional, and Kysely's SQLite adapter says it is not, so its migrator ran each migration
 * statement by statement outside any transaction. A process stopped in the middle (a deploy rolled back, Ctrl-C, the
 * OOM killer) left a half-made schema that no later start could migrate ("table already exists"). Told the truth, the
 * migrator applies the pending migrations and their bookkeeping rows in one transaction: all of them or none
 * (test/process.test.ts kills a migration partway). Nothing else reads the flag.
 *
 * And the write lock is waited for off the event loop (store/busy.ts): a transaction begins `IMMEDIATE`, taking the
 * lock first, so that only its `BEGIN` can meet another process's lock and be tried again — a deferred one that met
 * it at its first write, after its reads, could not be (SQLITE_BUSY_SNAPSHOT once the other commits) —, and a
 * statement outside a transaction is tried again as it is.
 */
class EmbeddedDialect extends SqliteDialect {
  constructor(
    private readonly database: SQLite.Database,
    private readonly lockWaitMs: number,
  ) {
    super({ database });
  }

  override createAdapter(): SqliteAdapter {
    return new TransactionalDdlSqliteAdapter();
  }

  override createDriver(): Driver {
    return new EmbeddedDriver(this.database, this.lockWaitMs);
  }
}

class EmbeddedDriver extends SqliteDriver {
  constructor(
    private readonly database: SQLite.Database,
    private readonly lockWaitMs: number,
  ) {
    super({ database });
  }

  /**
   * The driver's one connection, its statements outside a transaction (a transaction's `BEGIN` included) tried again
   * while another process holds the write lock: its `executeQuery` wrapped once, here, so that a query pays no more
   * than a check when nothing waits (not a wrapper, a closure and a promise more per query).
   */
  override async init(): Promise<void> {
    await super.init();
    const connection = await super.acquireConnection();
    await super.releaseConnection();
    const execute = connection.executeQuery.bind(connection);
    connection.executeQuery = (<R>(query: CompiledQuery) =>
      this.database.inTransaction
        ? execute<R>(query)
        : whileBusy(() => execute<R>(query), this.lockWaitMs, this.handBackWhile)) as typeof execute;
  }

  /**
   * Between tries the connection is handed back, so that this process's other statements (reads never wait for the
   * lock) run meanwhile, and taken again for the next try.
   */
  private readonly handBackWhile = async (ms: number): Promise<void> => {
    await super.releaseConnection();
    await sleep(ms);
    await super.acquireConnection();
  };

  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}

class TransactionalDdlSqliteAdapter extends SqliteAdapter {
  override get supportsTransactionalDdl(): boolean {
    return true;
  }
}

/**
 * The PostgreSQL pool. Every wait is bounded: a connection (new, or free in the pool) within
 * DATABASE_CONNECT_TIMEOUT_MS, a statement — lock waits included — within DATABASE_STATEMENT_TIMEOUT_MS on the server,
 * and a second later on the client in case the server itself stalls. An error on any client, idle or checked out
 * (the server restarted, a failover terminated the backend: 57P01), is the pool's to handle, never the process's.
 *
 * The server's timeouts are set by a statement once connected, not sent as startup parameters: a pooler in front
 * (PgBouncer, in either mode) refuses the startup parameters it does not track ("unsupported startup parameter"), and
 * in session mode passes a SET to the server connection that the session keeps. Through a pooler in transaction mode
 * (DATABASE_TRANSACTION_POOLER) nothing is set: the next transaction may run on another server connection, and a
 * setting would stay on this one for its other clients; the role's own settings bound the statements there
 * (docs/deployment.md).
 */
function postgresPool(connectionString: string, o: StoreConfig): pg.Pool {
  const statementMs = o.databaseStatementTimeoutMs ?? 10_000;
  const settings = o.databaseTransactionPooler
    ? undefined
    : `SET statement_timeout = ${statementMs}; SET idle_in_transaction_session_timeout = ${statementMs * 2}`;
  const pool = new pg.Pool({
    connectionString,
    max: o.databasePoolSize,
    connectionTimeoutMillis: o.databaseConnectTimeoutMs ?? 5000,
    query_timeout: statementMs + 1000,
    keepAlive: true,
    // Times are epoch milliseconds in bigint columns; they fit a JS number exactly.
    types: {
      getTypeParser: (oid, format) => (oid === PG_INT8 ? Number : pg.types.getTypeParser(oid, format)),
    },
    // Awaited before the pool hands the new connection out. The settings are statements, not startup parameters
    // (`options`), which PgBouncer refuses; they were queued ahead of the query the connection was opened for, two
    // queries on one client at once, which pg 8 warns is deprecated and pg 9 removes. A failure here is the
    // connection's: the pool ends it and the caller gets the error, as a failed connect.
    onConnect: async (client) => {
      // A checked-out client's error reaches the query that is using it (as a rejected promise); without a listener
      // the client's 'error' event itself would end the process (57P01 under load).
      client.on('error', () => {});
      if (settings) await client.query(settings);
    },
  });
  // An idle client's error: the pool discards the client and opens another when needed.
  pool.on('error', () => {});
  return pool;
}

/**
 * The pool as Kysely uses it. A client whose query failed because its connection failed (the client-side timeout of a
 * stalled server or a dead socket, a terminated backend) goes back to the pool with that error, and the pool discards
 * it. Released as healthy, it would keep its unanswered query, and every later query on it would wait the full
 * timeout — forever, after a failover that leaves the old sockets silent. (`pool.query`, used by the prepared
 * statements, already releases a failed client with its error.)
 */
function discardingBrokenClients(pool: pg.Pool): PostgresPool {
  return {
    async connect() {
      const client = await pool.connect();
      let broken: Error | undefined;
      const query = ((text: string, parameters: unknown[]) => {
        const result: unknown = client.query(text, parameters);
        if (result instanceof Promise) {
          result.catch((e: unknown) => {
            if (isConnectionFailure(e)) broken = e as Error;
          });
        }
        return result;
      }) as PostgresPoolClient['query'];
      return { query, release: () => client.release(broken) };
    },
    end: () => pool.end(),
  };
}

/**
 * Whether an error is a failure of the connection rather than of the statement: anything the server did not report
 * itself (a client-side timeout, a closed socket: EPIPE, ECONNRESET), class 08 (connection exception), 57P01–57P03
 * (the server is going away), or 25006 (the server is read-only: after a failover, a connection to the demoted primary
 * stays read-only for good, where a new one may reach the new primary). A statement the server cancelled (57014,
 * statement_timeout) or refused (23505...) leaves the connection usable. pg-pool already drops a client whose socket
 * closed; what it keeps is one whose read timed out, or whose server turned read-only, which this catches.
 */
function isConnectionFailure(e: unknown): boolean {
  return !(e instanceof pg.DatabaseError) || /^(08|57P0[1-3])/.test(e.code ?? '') || isReadOnly(e);
}

function sqliteFile(dataDir: string): {
  database: SQLite.Database;
  shared: SharedRead;
  prepare: (sql: string) => SQLite.Statement;
} {
  const database = new SQLite(prepareEmbeddedFile(dataDir));
  database.pragma('journal_mode = WAL');
  // Durable commits: WAL with `synchronous = NORMAL` survives a crash of the process but may roll back the last
  // commits after a power cut or a crash of the machine. A rotation answered and then rolled back would leave the
  // client holding a successor the database never saw, which reads as reuse and ends the connection; so every commit
  // is synced before its answer (FULL), and the group commit (prepared.ts) shares one sync among the rotations of an
  // event-loop turn.
  database.pragma('synchronous = FULL');
  database.pragma('foreign_keys = ON');
  database.pragma('busy_timeout = 5000');
  // Checkpoints run on a worker (checkpointer.ts); this connection checkpoints only if the worker falls far behind.
  database.pragma(`wal_autocheckpoint = ${FALLBACK_AUTOCHECKPOINT_PAGES}`);
  // Opened: from now on a statement that meets another process's write lock fails at once and is tried again off
  // the event loop (busy.ts), where SQLite's own wait would hold every request of the process (the open above may
  // still wait inside SQLite: nothing is served yet).
  database.pragma('busy_timeout = 0');
  const shared = new SharedRead(database);
  const prepare = preparing(database);
  cachePreparedStatements(database, shared, prepare);
  return { database, shared, prepare };
}

/** Distinct SQL texts are few (the queries are code), so the cache is bounded only as a guard against a bug. */
const STATEMENT_CACHE_LIMIT = 500;

/**
 * `LIMIT ?` / `OFFSET ?` → `LIMIT +?`: SQLite (with STAT4, as better-sqlite3 builds it) marks a bare bound LIMIT as
 * able to change the plan, so every new binding expires the statement and the next run parses and plans it again —
 * 11 µs against 4 µs for a page of clients here. The unary plus leaves the value alone and the plan stable.
 */
const BOUND_LIMIT = /\b(limit|offset) \?/gi;

/**
 * Prepares a new statement, its bound LIMIT made stable (`BOUND_LIMIT`): prepared.ts prepares its own statements with
 * it, outside Kysely's cache, since it runs them in raw mode.
 */
function preparing(database: SQLite.Database): (sql: string) => SQLite.Statement {
  const original = database.prepare.bind(database);
  return (sql) => original(sql.replace(BOUND_LIMIT, '$1 +?'));
}

/**
 * Kysely's SQLite driver prepares every query anew; preparing costs more than running a point read. Statements are
 * reusable, so keep them by SQL text. Safe because the driver only calls `all` or `run`, which finish synchronously.
 * The driver prepares each statement right before it runs it, its BEGIN included, so this is also where the turn's
 * shared read of the prepared statements ends: nothing Kysely runs joins it.
 */
function cachePreparedStatements(
  database: SQLite.Database,
  shared: SharedRead,
  prepare: (sql: string) => SQLite.Statement,
): void {
  const cache = new Map<string, SQLite.Statement>();
  database.prepare = ((sql: string) => {
    shared.end();
    let statement = cache.get(sql);
    if (!statement) {
      statement = prepare(sql);
      if (cache.size < STATEMENT_CACHE_LIMIT) cache.set(sql, statement);
    }
    return statement;
  }) as typeof database.prepare;
}
