import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { endOfTurn } from '../../src/base/turn-end.js';
import type { Store } from '../../src/store/database.js';
import { ENGINE, freshStore } from '../helpers/harness.js';

/** Prepared statements beside Kysely on one database: atomicity, group commit, and no joining of a transaction. */

let store: Store;
let close: () => Promise<void>;

beforeAll(async () => {
  ({ store, close } = await freshStore());
  await sql`CREATE TABLE notes_t (id text PRIMARY KEY, n integer NOT NULL)`.execute(store.db);
});
afterAll(() => close?.());

const INSERT = 'INSERT INTO notes_t (id, n) VALUES ($1, $2)';
const ids = async () =>
  (await store.sql.rows<{ id: string }>('SELECT id FROM notes_t ORDER BY id', [])).map((r) => r.id);

describe(`prepared statements (${ENGINE})`, () => {
  it('run on a database whose commits are synced before they answer (durable rotations)', async () => {
    // SQLite in WAL mode: FULL (2) syncs the log at every commit; NORMAL (1) would lose the last commits to a power cut.
    const setting =
      store.engine === 'sqlite'
        ? (await store.sql.rows<{ synchronous: number }>('PRAGMA synchronous', []))[0]?.synchronous
        : (await store.sql.rows<{ s: string }>("SELECT current_setting('synchronous_commit') AS s", []))[0]
            ?.s;
    expect(setting).toBe(store.engine === 'sqlite' ? 2 : 'on');
  });

  it('bind parameters by position and read rows back', async () => {
    expect(await store.sql.changes(INSERT, ['a', 1])).toBe(1);
    expect(await store.sql.rows('SELECT id, n FROM notes_t WHERE id = $1', ['a'])).toEqual([
      { id: 'a', n: 1 },
    ]);
  });

  it('read rows as objects keyed by column name: aliases, several rows, RETURNING, inside atomically', async () => {
    await store.sql.changes(INSERT, ['row-b', 2]);
    await store.sql.changes(INSERT, ['row-c', 3]);
    const text =
      "SELECT id AS note, n, n * 2 AS twice, NULL AS absent FROM notes_t WHERE id LIKE 'row-%' ORDER BY id";
    const expected = [
      { note: 'row-b', n: 2, twice: 4, absent: null },
      { note: 'row-c', n: 3, twice: 6, absent: null },
    ];
    expect(await store.sql.rows(text, [])).toEqual(expected);
    expect(await store.sql.rows(text, [])).toEqual(expected);
    expect(await store.sql.rows('SELECT id FROM notes_t WHERE id = $1', ['none'])).toEqual([]);
    const returning = 'INSERT INTO notes_t (id, n) VALUES ($1, $2) RETURNING id, n + 1 AS next';
    expect(await store.sql.rows(returning, ['row-d', 4])).toEqual([{ id: 'row-d', next: 5 }]);
    if (store.sql.engine === 'sqlite') {
      const inside = await store.sql.atomically((s) => s.rows(text, []));
      expect(inside.slice(0, 2)).toEqual(expected);
    }
    // The same text through Kysely still gives objects: the prepared statements are not the ones Kysely runs.
    const viaKysely = await sql.raw(text).execute(store.db);
    expect(viaKysely.rows.slice(0, 2)).toEqual(expected);
  });

  it('never join a Kysely transaction that is open: the transaction rolls back alone', async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const trx = store.db
      .transaction()
      .execute(async (t) => {
        await sql`INSERT INTO notes_t (id, n) VALUES ('in-trx', 1)`.execute(t);
        await held;
        throw new Error('roll back');
      })
      .catch(() => 'rolled back');
    await new Promise((resolve) => setTimeout(resolve, 20));
    const outside = store.sql.changes(INSERT, ['outside', 2]);
    release();
    expect(await trx).toBe('rolled back');
    expect(await outside).toBe(1);
    expect(await ids()).toEqual(expect.arrayContaining(['outside']));
    expect(await ids()).not.toContain('in-trx');
  });
});

/** The store's watch (how an outage and its end are noticed) is told the outcome of every prepared statement. */
describe(`the store's watch (${ENGINE})`, () => {
  const told: string[] = [];
  let watched: Store;
  let closeWatched: () => Promise<void>;
  beforeAll(async () => {
    ({ store: watched, close: closeWatched } = await freshStore(ENGINE, {
      succeeded: (wrote) => told.push(wrote ? 'wrote' : 'read'),
      failed: (e) => told.push(`failed: ${(e as Error).message}`),
    }));
    await sql`CREATE TABLE notes_t (id text PRIMARY KEY, n integer NOT NULL)`.execute(watched.db);
  });
  afterAll(() => closeWatched?.());

  it('hears of a statement that succeeded and of one that failed, which still rejects', async () => {
    told.length = 0;
    expect(await watched.sql.changes(INSERT, ['w', 1])).toBe(1);
    expect(told).toEqual(['wrote']);
    await expect(watched.sql.changes(INSERT, ['w', 2])).rejects.toThrow(/unique|UNIQUE/);
    expect(told).toHaveLength(2);
    expect(told[1]).toMatch(/^failed: .*(unique|UNIQUE)/);
  });

  it('hears of a text that does not prepare, which rejects like any failed statement', async () => {
    told.length = 0;
    const bad = watched.sql.rows('SELEC id FROM notes_t', []);
    await expect(bad).rejects.toThrow(/syntax/);
    expect(told).toHaveLength(1);
    expect(told[0]).toMatch(/^failed: .*syntax/);
  });

  it('hears whether a statement wrote: a full disk refuses writes and serves reads', async () => {
    told.length = 0;
    await watched.sql.rows('SELECT id, n FROM notes_t WHERE id = $1', ['w']);
    await watched.sql.rows('UPDATE notes_t SET n = n + 1 WHERE id = $1 RETURNING n', ['w']);
    await sql`SELECT n FROM notes_t`.execute(watched.db);
    await watched.db.transaction().execute((t) => sql`DELETE FROM notes_t WHERE id = 'none'`.execute(t));
    // Kysely's transaction: its BEGIN, its DELETE, and its COMMIT, which is what makes a write of it happen.
    expect(told).toEqual(['read', 'wrote', 'read', 'read', 'wrote', 'wrote']);
  });

  it('hears of a statement that waited for a Kysely transaction, too', async () => {
    if (watched.engine !== 'sqlite') return; // only the embedded database waits for a Kysely transaction
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const trx = watched.db.transaction().execute(async (t) => {
      await sql`INSERT INTO notes_t (id, n) VALUES ('held', 1)`.execute(t);
      await held;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    told.length = 0;
    const waiting = watched.sql.changes(INSERT, ['held', 2]);
    release();
    await trx;
    await expect(waiting).rejects.toThrow(/unique|UNIQUE/);
    expect(told.filter((t) => t.startsWith('failed'))).toHaveLength(1);
  });
});

/** The event loop's next turn: a wait that anything already due at this turn's end (base/turn-end.ts) comes before. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** Group commit is the embedded database's: tested on a SQLite store whatever engine the rest of the suite uses. */
describe('group commit (sqlite, on every run)', () => {
  let sqlite: Store;
  let closeSqlite: () => Promise<void>;
  beforeAll(async () => {
    ({ store: sqlite, close: closeSqlite } = await freshStore('sqlite'));
    await sql`CREATE TABLE notes_t (id text PRIMARY KEY, n integer NOT NULL)`.execute(sqlite.db);
  });
  afterAll(() => closeSqlite?.());

  it('units asked for together commit together; one that throws undoes only its own writes', async () => {
    const s = sqlite.sql;
    if (s.engine !== 'sqlite') throw new Error('expected the embedded database');
    const results = await Promise.allSettled([
      s.atomically((tx) => tx.changes(INSERT, ['g1', 1])),
      s.atomically((tx) => {
        tx.changes(INSERT, ['g2', 2]);
        throw new Error('this unit fails');
      }),
      s.atomically((tx) => tx.changes(INSERT, ['g3', 3]) + tx.changes(INSERT, ['g4', 4])),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(results[2]).toEqual({ status: 'fulfilled', value: 2 });
    const now = (await s.rows<{ id: string }>('SELECT id FROM notes_t ORDER BY id', [])).map((r) => r.id);
    expect(now).toEqual(expect.arrayContaining(['g1', 'g3', 'g4']));
    expect(now).not.toContain('g2');
  });

  it('a unit whose error rolled the whole transaction back fails the group: no unit after it commits on its own', async () => {
    const s = sqlite.sql;
    if (s.engine !== 'sqlite') throw new Error('expected the embedded database');
    // SQLite may roll back the whole transaction, not only the failed statement, on SQLITE_FULL, SQLITE_IOERR,
    // SQLITE_BUSY or SQLITE_NOMEM (lang_transaction.html); a trigger's RAISE(ROLLBACK) does it every time.
    await sql`CREATE TRIGGER notes_t_rollback BEFORE INSERT ON notes_t WHEN NEW.id = 'rolls-back'
      BEGIN SELECT RAISE(ROLLBACK, 'the whole transaction rolled back'); END`.execute(sqlite.db);
    const results = await Promise.allSettled([
      s.atomically((tx) => tx.changes(INSERT, ['before', 1])),
      s.atomically((tx) => tx.changes(INSERT, ['rolls-back', 2])),
      s.atomically((tx) => tx.changes(INSERT, ['after', 3])),
    ]);
    await sql`DROP TRIGGER notes_t_rollback`.execute(sqlite.db);
    // Each answer says what the database holds: a unit told it failed wrote nothing, and none is told it committed.
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    const ids = (await s.rows<{ id: string }>('SELECT id FROM notes_t', [])).map((r) => r.id);
    expect(ids).not.toContain('before');
    expect(ids).not.toContain('after');
    // The connection is left usable: the next group commits.
    await expect(s.atomically((tx) => tx.changes(INSERT, ['next', 4]))).resolves.toBe(1);
  });

  it("commits after the answers of its turn: an answer waiting for the turn's end is not held behind the sync", async () => {
    const s = sqlite.sql;
    if (s.engine !== 'sqlite') throw new Error('expected the embedded database');
    // A turn of its own: the last test's read left its turn's end already due (the shared read waits for it).
    await nextTurn();
    const order: string[] = [];
    // The unit is asked for before the answer begins waiting, as when a rotation and a GET arrive in one read.
    const committed = s.atomically((tx) => {
      order.push('group committed');
      return tx.changes(INSERT, ['after-answers', 1]);
    });
    const answered = endOfTurn().then(() => order.push('answer written'));
    await Promise.all([committed, answered]);
    expect(order).toEqual(['answer written', 'group committed']);
  });
});

/**
 * The shared read (store/prepared.ts): the reads of one turn run in one read transaction, which ends with the turn and
 * before anything writes. Watched from a second connection to the same file, as another process would see it.
 */
describe('shared read of a turn (sqlite, on every run)', () => {
  let sqlite: Store;
  let other: SQLite.Database;
  let closeSqlite: () => Promise<void>;
  beforeAll(async () => {
    let dataDir: string;
    ({ store: sqlite, dataDir, close: closeSqlite } = await freshStore('sqlite'));
    await sql`CREATE TABLE notes_t (id text PRIMARY KEY, n integer NOT NULL)`.execute(sqlite.db);
    other = new SQLite(join(dataDir, 'svc.sqlite'));
    // Each text prepared once beforehand, as on a running server: preparing is not what ends the shared read.
    await read('primed');
    await sqlite.sql.changes(INSERT, ['primed', 0]);
    await sqlite.sql.rows(INSERT_RETURNING, ['primed-returning']);
  });
  afterAll(async () => {
    other?.close();
    await closeSqlite?.();
  });

  const INSERT_RETURNING = 'INSERT INTO notes_t (id, n) VALUES ($1, 1) RETURNING id';
  const read = async (id: string) =>
    (await sqlite.sql.rows<{ id: string }>('SELECT id FROM notes_t WHERE id = $1', [id])).length;
  const seenByOther = (id: string) => other.prepare('SELECT id FROM notes_t WHERE id = ?').all(id).length;

  it('reads of one turn see one snapshot, and the next turn sees what others committed since', async () => {
    expect(await read('from-other')).toBe(0);
    other.prepare('INSERT INTO notes_t (id, n) VALUES (?, 1)').run('from-other');
    // Same turn: still the snapshot of the turn's first read.
    expect(await read('from-other')).toBe(0);
    await nextTurn();
    expect(await read('from-other')).toBe(1);
  });

  it("ends after the answers of its turn: an answer written at the turn's end still reads the turn's snapshot", async () => {
    await nextTurn();
    expect(await read('after-answers')).toBe(0);
    other.prepare('INSERT INTO notes_t (id, n) VALUES (?, 1)').run('after-answers');
    // Where a fast path writes its answer (base/turn-end.ts): the shared read has not ended yet, so no COMMIT and lock
    // release come between a request and its answer.
    await endOfTurn();
    expect(await read('after-answers')).toBe(0);
    await nextTurn();
    expect(await read('after-answers')).toBe(1);
  });

  it('a write after a read in the same turn commits on its own, at once', async () => {
    await nextTurn();
    expect(await read('changed')).toBe(0);
    expect(await sqlite.sql.changes(INSERT, ['changed', 1])).toBe(1);
    expect(seenByOther('changed')).toBe(1);
    // And this process reads its own write in the same turn.
    expect(await read('changed')).toBe(1);
  });

  it('a write with RETURNING run as rows commits at once too', async () => {
    await nextTurn();
    expect(await read('returned')).toBe(0);
    const rows = await sqlite.sql.rows(INSERT_RETURNING, ['returned']);
    expect(rows).toEqual([{ id: 'returned' }]);
    expect(seenByOther('returned')).toBe(1);
  });

  it('a Kysely statement after a read in the same turn never joins the shared read', async () => {
    await nextTurn();
    expect(await read('kysely')).toBe(0);
    await sqlite.db
      .insertInto('notes_t' as never)
      .values({ id: 'kysely', n: 1 } as never)
      .execute();
    expect(seenByOther('kysely')).toBe(1);
  });

  it('a group commit that runs while a read of its turn is open is committed when it answers', async () => {
    const s = sqlite.sql;
    if (s.engine !== 'sqlite') throw new Error('expected the embedded database');
    await nextTurn();
    // The unit is asked for first, so its flush is queued before the end of the turn's shared read.
    const written = s.atomically((tx) => tx.changes(INSERT, ['grouped', 1]));
    expect(await read('grouped')).toBe(0);
    expect(await written).toBe(1);
    expect(seenByOther('grouped')).toBe(1);
  });
});
