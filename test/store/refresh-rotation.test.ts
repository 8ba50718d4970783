import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret, randomSecret } from '../../src/base/secrets.js';
import { CONNECTION_TTL_MS } from '../../src/domain/connections.js';
import { seedDemo } from '../../src/domain/demo-seed.js';
import {
  findAndRotate,
  ROTATION_STATEMENTS,
  storeRefreshToken,
  type RefreshGrant,
  type Rotation,
  type RotationGuard,
} from '../../src/domain/refresh-tokens.js';
import { ManualClock } from '../../src/base/clock.js';
import type { Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { sql } from 'kysely';
import type { PreparedSql } from '../../src/store/prepared.js';
import { StatementWaitTimeout } from '../../src/store/coalesce.js';
import { ENGINE, freshStore } from '../helpers/harness.js';
import { type PlanParameter, queryPlan, refreshTokenReads } from '../helpers/plans.js';
import { connectionRow, holdRefreshTokenRows } from '../helpers/rows.js';

/**
 * One rotation of the refresh grant's store (domain/refresh-tokens.ts) on the suite's engine, under a plan that rotates
 * any unrotated row: what it writes, that on PostgreSQL it is one statement when the guard allows it, and what happens
 * when the guard or a concurrent rotation keeps the write from happening. The grant's own checks against the guard are
 * held over HTTP (test/auth/refresh.test.ts).
 */
describe(`a refresh token rotation in the store (${ENGINE})`, () => {
  let store: Store;
  let close: () => Promise<void>;
  const clock = new ManualClock(Date.parse('2026-11-25T00:00:00Z'));
  let userId: string;
  let n = 0;

  beforeAll(async () => {
    ({ store, close } = await freshStore());
    await migrateToLatest(store.db);
    await seedDemo(store.db, clock, false);
    userId = (
      await store.db.selectFrom('users').select('id').where('username', '=', 'ada').executeTakeFirstOrThrow()
    ).id;
  });
  afterAll(() => close?.());

  /** A connection (of a client of its own) with one token of a family, its parent already rotated and kept. */
  async function connection(o: { scopes?: string; resource?: string } = {}) {
    const id = `con_rotation_${++n}`;
    const clientId = `dcr_rotation_${n}`;
    await store.db
      .insertInto('connections')
      .values(
        connectionRow(
          { id, user_id: userId, client_id: clientId, scopes: 'agency:mcp:read offline_access', ...o },
          clock.now(),
        ),
      )
      .execute();
    const family = hashSecret(`family-${n}`);
    const parent = hashSecret(`parent-${n}`);
    const token = hashSecret(`token-${n}`);
    const base = { connectionId: id, scope: 'agency:mcp:read offline_access', family, now: clock.now() };
    await storeRefreshToken(store.db, { ...base, hash: parent, parentHash: null, salt: randomSecret(16) });
    await store.db
      .updateTable('refresh_tokens')
      .set({ rotated_at: clock.now() })
      .where('hash', '=', parent)
      .execute();
    await storeRefreshToken(store.db, { ...base, hash: token, parentHash: parent, salt: randomSecret(16) });
    return { id, family, parent, token, guard: { clientId, resource: null } as RotationGuard };
  }

  /** `count` connections as `connection` makes them, one after the other. */
  async function connections(count: number) {
    const made: Awaited<ReturnType<typeof connection>>[] = [];
    for (let i = 0; i < count; i++) made.push(await connection());
    return made;
  }

  const rotationOf = (hash: string, family: string): Rotation => ({
    hash,
    salt: randomSecret(16),
    successor: { hash: hashSecret(randomSecret()), family, salt: randomSecret(16) },
    now: clock.now(),
  });
  /** Rotates every unrotated row: what the grant does once its checks pass. */
  const anyUnrotated = (row: RefreshGrant | undefined) => ({
    rotate: row !== undefined && row.rotated_at === null,
    answer: row,
  });

  /**
   * `store.sql` counting the statements it is asked to run; with `connections`, a pool of that many as the rotation
   * sees it (with one, every rotation that arrives while one runs waits for the next statement).
   */
  function counted(o: { connections?: number; connectTimeoutMs?: number } = {}): {
    sql: PreparedSql;
    statements: () => number;
  } {
    let count = 0;
    const sql = new Proxy(store.sql, {
      get(target, key, receiver) {
        if (key === 'connections' && o.connections !== undefined) return o.connections;
        if (key === 'connectTimeoutMs' && o.connectTimeoutMs !== undefined) return o.connectTimeoutMs;
        const value = Reflect.get(target, key, receiver) as unknown;
        if ((key === 'rows' || key === 'changes') && typeof value === 'function') {
          return (...args: unknown[]) => {
            count++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return value;
      },
    });
    return { sql, statements: () => count };
  }

  const row = (hash: string) =>
    store.db.selectFrom('refresh_tokens').selectAll().where('hash', '=', hash).executeTakeFirst();

  it('consumes the token with its salt, stores the successor, slides the connection, prunes the grandparent', async () => {
    const c = await connection();
    const rotation = rotationOf(c.token, c.family);
    clock.advance(1000);
    const { sql, statements } = counted();
    const { answer, won } = await findAndRotate(
      sql,
      { ...rotation, now: clock.now() },
      c.guard,
      anyUnrotated,
    );
    expect(won).toBe(true);
    expect(answer?.hash).toBe(c.token);
    if (store.engine === 'postgres') expect(statements()).toBe(1);
    expect(await row(c.token)).toMatchObject({ rotated_at: clock.now(), successor_salt: rotation.salt });
    expect(await row(rotation.successor.hash)).toMatchObject({
      connection_id: c.id,
      parent_hash: c.token,
      successor_salt: rotation.successor.salt,
      scope: 'agency:mcp:read offline_access',
      family: c.family,
      rotated_at: null,
    });
    expect(await row(c.parent)).toBeUndefined();
    const slid = await store.db
      .selectFrom('connections')
      .selectAll()
      .where('id', '=', c.id)
      .executeTakeFirstOrThrow();
    expect(slid.last_used_at).toBe(clock.now());
  });

  /**
   * The generic plans (test/helpers/plans.ts) of the PostgreSQL statements of a rotation of `c`'s token, as JSON: the
   * grant's read, the two single rotations and the one that rotations waiting for a connection share.
   */
  async function postgresRotationPlans(c: Awaited<ReturnType<typeof connection>>, now: number) {
    // Each statement's parameters: FIND_GRANT takes the hash alone, the rotations seven or nine.
    const rotation: PlanParameter[] = [
      ['bigint', `${now}`],
      ['text', `'${c.token}'`],
      ['text', "'s'"],
      ['text', "'h'"],
      ['text', "'s2'"],
      ['bigint', `${now + 1}`],
      ['text', `'${c.family}'`],
      ['text', `'${c.guard.clientId}'`],
      ['text', 'NULL'],
    ];
    const { FIND_GRANT, ROTATE, ROTATE_GUARDED, ROTATE_GUARDED_MANY } = ROTATION_STATEMENTS.postgres;
    // The same parameters, one array each, for the statement that rotations waiting for a connection share.
    const many = rotation.map(([type, literal]): PlanParameter => [
      `${type}[]`,
      `ARRAY[${literal}]::${type}[]`,
    ]);
    return [
      await queryPlan(store, FIND_GRANT, [rotation[1]!]),
      await queryPlan(store, ROTATE, rotation.slice(0, 7)),
      await queryPlan(store, ROTATE_GUARDED, rotation),
      await queryPlan(store, ROTATE_GUARDED_MANY, many),
    ];
  }

  describe.runIf(ENGINE === 'postgres')('plans as rotations churn the table (PostgreSQL)', () => {
    // Each rotation leaves a dead row and dead index entries until a vacuum. Every statement of a rotation must read
    // `refresh_tokens` by its primary key whatever the statistics when the plan was made: the connection's or the
    // expiry's index walks every dead entry of the connection, or of the table, since the last vacuum, and a scan
    // chosen while the table was small is kept while it grows unless it is analyzed again. The cases build on each
    // other, in order, and run before the next test, whose 20,000 live tokens would make any plan read by key.
    let c: Awaited<ReturnType<typeof connection>>;
    beforeAll(async () => {
      // No vacuum or analyze of the server's own in between (the suite's server may run autovacuum).
      await sql`ALTER TABLE refresh_tokens SET (autovacuum_enabled = false)`.execute(store.db);
      c = await connection();
    });
    afterAll(async () => {
      await sql`ALTER TABLE refresh_tokens RESET (autovacuum_enabled)`.execute(store.db);
    });

    const everyReadByKey = async () => {
      // Connections are few here, and scanned; they are updated in place (HOT) and do not pile up dead entries.
      for (const plan of await postgresRotationPlans(c, clock.now()))
        expect(new Set(refreshTokenReads(plan))).toEqual(new Set(['refresh_tokens_pkey']));
    };

    it('a small table, never analyzed', everyReadByKey);
    // The statements before lever 40 read this state by key too (its size rules out a scan); it is the step between
    // the two that failed on them (a scan, then `refresh_tokens_connection_id`), and holds that no change to the
    // statements trades one for the other.
    it('20,000 dead rows, never analyzed', async () => {
      const now = clock.now();
      // Rotated tokens of the connection's family, deleted as rotations prune them: dead rows, not vacuumed.
      await sql`INSERT INTO refresh_tokens
          (hash, connection_id, parent_hash, successor_salt, scope, issued_at, rotated_at, expires_at, family)
        SELECT 'dead-' || g, ${c.id}, NULL, 's', 'agency:mcp:read', ${now}, ${now}, ${now + 86_400_000}, ${c.family}
        FROM generate_series(1, 20000) g`.execute(store.db);
      await sql`DELETE FROM refresh_tokens WHERE hash LIKE 'dead-%'`.execute(store.db);
      await everyReadByKey();
    });
    it('20,000 dead rows, analyzed (as autovacuum does between vacuums)', async () => {
      await sql`ANALYZE refresh_tokens, connections`.execute(store.db);
      await everyReadByKey();
    });
  });

  it('finds every row by its key under any plan, with many tokens of no family beside a few of one', async () => {
    // Tokens from before families, as a database just migrated holds them: the statistics then say families are few,
    // which once led the generic plan to read a grandparent through the family index (lever 35).
    const c = await connection();
    const now = clock.now();
    const legacy = Array.from({ length: 20_000 }, (_, i) => ({
      hash: hashSecret(`legacy-${i}`),
      connection_id: c.id,
      parent_hash: null,
      successor_salt: 'salt',
      scope: 'agency:mcp:read',
      issued_at: now,
      rotated_at: now,
      expires_at: now + 86_400_000,
      family: null,
    }));
    for (let i = 0; i < legacy.length; i += 500)
      await store.db
        .insertInto('refresh_tokens')
        .values(legacy.slice(i, i + 500))
        .execute();
    // And connections enough that reading one by its key is the plan the statistics call for.
    const others = Array.from({ length: 2000 }, (_, i) =>
      connectionRow({ id: `con_other_${i}`, user_id: userId, client_id: `dcr_other_${i}` }, now),
    );
    for (let i = 0; i < others.length; i += 500)
      await store.db
        .insertInto('connections')
        .values(others.slice(i, i + 500))
        .execute();
    const plans: string[] = [];
    if (store.engine === 'sqlite') {
      // The service never runs ANALYZE on the embedded database: SQLite plans without statistics, as here.
      const any: PlanParameter[] = Array.from({ length: 8 }, () => ['text', "'x'"]);
      for (const text of Object.values(ROTATION_STATEMENTS.sqlite))
        plans.push(await queryPlan(store, text, any));
      for (const plan of plans) expect(plan).not.toMatch(/\bSCAN\b/);
    } else {
      await sql`ANALYZE refresh_tokens, connections`.execute(store.db);
      plans.push(...(await postgresRotationPlans(c, now)));
      for (const plan of plans) {
        expect(plan).not.toContain('Seq Scan');
        // The grandparent read through the family index by `family IS NOT NULL`: every token of every family.
        expect(plan).not.toMatch(/"Index Cond":"\(family IS NOT NULL\)"/);
        expect(new Set(refreshTokenReads(plan))).toEqual(new Set(['refresh_tokens_pkey']));
      }
    }
    expect(plans.length).toBeGreaterThan(0);
  });

  it('an unknown token: nothing planned, nothing written', async () => {
    const nobody = { clientId: 'dcr_nobody', resource: null };
    const { answer, won } = await findAndRotate(
      store.sql,
      rotationOf(hashSecret('nobody'), 'f'),
      nobody,
      anyUnrotated,
    );
    expect({ answer, won }).toEqual({ answer: undefined, won: false });
  });

  // What the guard refuses, the plan decides on the row as it is: a plan that rotates anyway does (by the second path).
  type Connection = Awaited<ReturnType<typeof connection>>;
  const same = (c: Connection) => c.guard;
  /** The connection's scopes, as a newer consent sets them. */
  const grantingOnly = (scopes: string) => (c: Connection) =>
    store.db.updateTable('connections').set({ scopes }).where('id', '=', c.id).execute();
  const refusals: [string, (c: Connection) => Promise<unknown>, (c: Connection) => RotationGuard][] = [
    ['another client', async () => {}, () => ({ clientId: 'dcr_someone_else', resource: null })],
    ['another resource', async () => {}, (c) => ({ ...c.guard, resource: 'https://other.example/mcp' })],
    [
      'a revoked connection',
      (c) => store.db.updateTable('connections').set({ status: 'revoked' }).where('id', '=', c.id).execute(),
      same,
    ],
    [
      'an expired connection',
      (c) =>
        store.db.updateTable('connections').set({ expires_at: clock.now() }).where('id', '=', c.id).execute(),
      same,
    ],
    [
      'an expired token',
      (c) =>
        store.db
          .updateTable('refresh_tokens')
          .set({ expires_at: clock.now() })
          .where('hash', '=', c.token)
          .execute(),
      same,
    ],
    ['no scope left once narrowed to the connection', grantingOnly('agency:mcp:write'), same],
    ['a connection that no longer grants offline_access', grantingOnly('agency:mcp:read'), same],
  ];
  it.each(refusals)('the guard refuses %s: the one statement writes nothing', async (_, change, guardOf) => {
    const c = await connection();
    await change(c);
    const refusing = guardOf(c);
    const { sql, statements } = counted();
    const refuseAll = (r: RefreshGrant | undefined) => ({ rotate: false, answer: r });
    const { won } = await findAndRotate(sql, rotationOf(c.token, c.family), refusing, refuseAll);
    expect(won).toBe(false);
    expect((await row(c.token))?.rotated_at).toBeNull();
    expect(await row(c.parent)).toBeDefined();
    if (store.engine === 'postgres') expect(statements()).toBe(1);
    // A plan that rotates anyway (a guard stricter than the grant) rotates, by the read and the compare-and-set.
    const again = counted();
    expect((await findAndRotate(again.sql, rotationOf(c.token, c.family), refusing, anyUnrotated)).won).toBe(
      true,
    );
    if (store.engine === 'postgres') expect(again.statements()).toBe(3);
  });

  it.runIf(ENGINE === 'postgres').each(refusals)(
    'the guard refuses %s in a statement shared with other rotations too',
    async (_, change, guardOf) => {
      const [busy, c, beside] = await connections(3);
      await change(c!);
      // Asked in one turn, the three share one statement.
      const { sql, statements } = counted({ connections: 1 });
      const refuseAll = (r: RefreshGrant | undefined) => ({ rotate: false, answer: r });
      const [, refused, allowed] = await Promise.all([
        findAndRotate(sql, rotationOf(busy!.token, busy!.family), busy!.guard, anyUnrotated),
        findAndRotate(sql, rotationOf(c!.token, c!.family), guardOf(c!), refuseAll),
        findAndRotate(sql, rotationOf(beside!.token, beside!.family), beside!.guard, anyUnrotated),
      ]);
      expect(statements()).toBe(1);
      expect([refused.won, allowed.won]).toEqual([false, true]);
      expect((await row(c!.token))?.rotated_at).toBeNull();
      expect(await row(c!.parent)).toBeDefined();
    },
  );

  it('a token the guard allows and the plan refuses is a bug, answered as one', async () => {
    const c = await connection();
    const refuse = () => {
      throw new Error('refused');
    };
    const attempt = findAndRotate(store.sql, rotationOf(c.token, c.family), c.guard, refuse);
    if (store.engine === 'postgres') {
      await expect(attempt).rejects.toThrow(/consumed a refresh token that the refresh grant refuses/);
    } else {
      // On the embedded database the plan runs before any write: nothing was consumed.
      await expect(attempt).rejects.toThrow('refused');
      expect((await row(c.token))?.rotated_at).toBeNull();
    }
  });

  it('concurrent rotations of one token: one wins; the others see the row with the winner’s salt', async () => {
    const c = await connection();
    const rotations = Array.from({ length: 8 }, () => rotationOf(c.token, c.family));
    const results = await Promise.all(
      rotations.map((r) => findAndRotate(store.sql, r, c.guard, anyUnrotated)),
    );
    const winners = results.flatMap((r, i) => (r.won ? [rotations[i]!] : []));
    expect(winners).toHaveLength(1);
    for (const r of results.filter((x) => !x.won)) {
      expect(r.answer?.rotated_at).not.toBeNull();
      expect(r.answer?.successor_salt).toBe(winners[0]!.salt);
    }
    const family = await store.db
      .selectFrom('refresh_tokens')
      .select('hash')
      .where('family', '=', c.family)
      .execute();
    expect(family.map((f) => f.hash).sort()).toEqual([c.token, winners[0]!.successor.hash].sort());
  });

  describe.runIf(ENGINE === 'postgres')('rotations that wait for a connection (PostgreSQL)', () => {
    it('share one statement, each written as its own would be', async () => {
      const cs = await connections(30);
      clock.advance(1000);
      const rotations = cs.map((c) => rotationOf(c.token, c.family));
      const { sql, statements } = counted();
      const results = await Promise.all(
        rotations.map((r, i) => findAndRotate(sql, r, cs[i]!.guard, anyUnrotated)),
      );
      expect(results.every((r) => r.won)).toBe(true);
      expect(results.map((r) => r.answer?.hash)).toEqual(cs.map((c) => c.token));
      // Asked in one turn, they share one statement (it takes up to 32).
      expect(statements()).toBe(1);
      for (const [i, c] of cs.entries()) {
        const r = rotations[i]!;
        expect(await row(c.token)).toMatchObject({ rotated_at: clock.now(), successor_salt: r.salt });
        expect(await row(r.successor.hash)).toMatchObject({
          connection_id: c.id,
          parent_hash: c.token,
          successor_salt: r.successor.salt,
          family: c.family,
          issued_at: clock.now(),
          rotated_at: null,
        });
        expect(await row(c.parent)).toBeUndefined();
      }
      const slid = await store.db
        .selectFrom('connections')
        .select('last_used_at')
        .where(
          'id',
          'in',
          cs.map((c) => c.id),
        )
        .execute();
      expect(slid.map((c) => c.last_used_at)).toEqual(cs.map(() => clock.now()));
    });

    it('answer each rotation of a shared statement as if it had run alone', async () => {
      const [first, valid, revoked, other] = await connections(4);
      await store.db
        .updateTable('connections')
        .set({ status: 'revoked' })
        .where('id', '=', revoked!.id)
        .execute();
      // Asked in one turn, they share one statement, except the second rotation of `valid`'s token, which waits for
      // the one before it and then runs alone.
      const { sql, statements } = counted({ connections: 1 });
      const refuseAll = (r: RefreshGrant | undefined) => ({ rotate: false, answer: r });
      const validRotation = rotationOf(valid!.token, valid!.family);
      const [a, b, rotatedAlready, unknown, revokedOne, otherClient, retry] = await Promise.all([
        findAndRotate(sql, rotationOf(first!.token, first!.family), first!.guard, anyUnrotated),
        findAndRotate(sql, validRotation, valid!.guard, anyUnrotated),
        findAndRotate(sql, rotationOf(other!.parent, other!.family), other!.guard, anyUnrotated),
        findAndRotate(sql, rotationOf(hashSecret('nobody'), 'f'), first!.guard, anyUnrotated),
        findAndRotate(sql, rotationOf(revoked!.token, revoked!.family), revoked!.guard, refuseAll),
        findAndRotate(
          sql,
          rotationOf(other!.token, other!.family),
          { clientId: 'dcr_someone_else', resource: null },
          refuseAll,
        ),
        findAndRotate(sql, rotationOf(valid!.token, valid!.family), valid!.guard, anyUnrotated),
      ]);
      expect(statements()).toBe(2);
      expect([a.won, b.won]).toEqual([true, true]);
      expect(rotatedAlready).toMatchObject({ won: false, answer: { hash: other!.parent } });
      expect(rotatedAlready.answer?.rotated_at).not.toBeNull();
      expect(unknown).toEqual({ answer: undefined, won: false });
      expect(revokedOne).toMatchObject({ won: false, answer: { status: 'revoked', rotated_at: null } });
      expect(otherClient).toMatchObject({ won: false, answer: { rotated_at: null } });
      expect((await row(revoked!.token))?.rotated_at).toBeNull();
      expect((await row(other!.token))?.rotated_at).toBeNull();
      // The retry came after the rotation it repeats: it sees the token consumed, with that rotation's salt.
      expect(retry.won).toBe(false);
      expect(retry.answer?.successor_salt).toBe(validRotation.salt);
    });

    it('slide a connection two of them rotate to the later expiry, each successor issued at its own time', async () => {
      const [busy, c] = await connections(2);
      // A second family under the same connection (two chains of one app, as a retried authorization leaves them).
      const family = hashSecret(`second-family-${n}`);
      const second = hashSecret(`second-token-${n}`);
      await storeRefreshToken(store.db, {
        hash: second,
        connectionId: c!.id,
        parentHash: null,
        salt: randomSecret(16),
        scope: 'agency:mcp:read offline_access',
        family,
        now: clock.now(),
      });
      const early = { ...rotationOf(c!.token, c!.family), now: clock.now() + 1000 };
      const late = { ...rotationOf(second, family), now: clock.now() + 2000 };
      // Asked in one turn, the three share one statement.
      const { sql, statements } = counted({ connections: 1 });
      const results = await Promise.all([
        findAndRotate(sql, rotationOf(busy!.token, busy!.family), busy!.guard, anyUnrotated),
        findAndRotate(sql, late, c!.guard, anyUnrotated),
        findAndRotate(sql, early, c!.guard, anyUnrotated),
      ]);
      expect(statements()).toBe(1);
      expect(results.map((r) => r.won)).toEqual([true, true, true]);
      expect(await row(early.successor.hash)).toMatchObject({ issued_at: early.now, family: c!.family });
      expect(await row(late.successor.hash)).toMatchObject({ issued_at: late.now, family });
      expect(await row(c!.token)).toMatchObject({ rotated_at: early.now });
      expect(await row(second)).toMatchObject({ rotated_at: late.now });
      const slid = await store.db
        .selectFrom('connections')
        .select(['expires_at', 'last_used_at'])
        .where('id', '=', c!.id)
        .executeTakeFirstOrThrow();
      expect(slid).toEqual({ expires_at: late.now + CONNECTION_TTL_MS, last_used_at: late.now });
    });

    /** A rotation the database refuses, and the SQLSTATE it refuses the shared statement with. */
    type Refused = (
      c: Awaited<ReturnType<typeof connection>>,
      first: Awaited<ReturnType<typeof connection>>,
    ) => [Rotation, RotationGuard];
    const refusedRotations: [string, string, Refused][] = [
      // PostgreSQL takes no NUL in text (SQLSTATE 22021): the whole statement is refused.
      [
        'the database refuses a value one of them carries',
        '22021',
        (c) => [rotationOf(c.token, c.family), { clientId: 'a\u0000b', resource: null }],
      ],
      // A successor whose hash is a stored token's (one the statement keeps): the primary key refuses it.
      [
        'the shared statement breaks a constraint for one of them',
        '23505',
        (c, first) => {
          const clash = rotationOf(c.token, c.family);
          clash.successor.hash = first.token;
          return [clash, c.guard];
        },
      ],
    ];

    it.each(refusedRotations)('run again one by one when %s', async (_, code, refused) => {
      const [first, ok, bad] = await connections(3);
      const { sql, statements } = counted({ connections: 1 });
      const okRotation = rotationOf(ok!.token, ok!.family);
      const [, okResult, badResult] = await Promise.allSettled([
        findAndRotate(sql, rotationOf(first!.token, first!.family), first!.guard, anyUnrotated),
        findAndRotate(sql, okRotation, ok!.guard, anyUnrotated),
        findAndRotate(sql, ...refused(bad!, first!), anyUnrotated),
      ]);
      // Asked in one turn: together (refused whole), then each alone.
      expect(statements()).toBe(4);
      expect(okResult).toMatchObject({ status: 'fulfilled', value: { won: true } });
      expect(await row(okRotation.successor.hash)).toMatchObject({ parent_hash: ok!.token });
      expect(badResult).toMatchObject({ status: 'rejected', reason: { code } });
      expect((await row(bad!.token))?.rotated_at).toBeNull();
    });

    it('give up waiting behind a statement stuck on a row lock after the connect timeout, and write nothing', async () => {
      const [locked, waiting] = await connections(2);
      const lock = await holdRefreshTokenRows(store.db, [locked!.token]);
      try {
        const counter = counted({ connections: 1, connectTimeoutMs: 200 });
        const lockedRotation = findAndRotate(
          counter.sql,
          rotationOf(locked!.token, locked!.family),
          locked!.guard,
          anyUnrotated,
        );
        // Its statement takes the one connection and waits on the lock; only then is the second asked.
        await lock.waitForWaiters(1);
        const waited = await findAndRotate(
          counter.sql,
          rotationOf(waiting!.token, waiting!.family),
          waiting!.guard,
          anyUnrotated,
        ).catch((e: unknown) => e);
        expect(waited).toBeInstanceOf(StatementWaitTimeout);
        // The bound is the one the store was given for a connection, not another.
        expect((waited as Error).message).toBe('waited more than 200 ms for a database statement to start');
        expect(counter.statements()).toBe(1);
        expect((await row(waiting!.token))?.rotated_at).toBeNull();
        await lock.release();
        expect((await lockedRotation).won).toBe(true);
        // The one that gave up rotates when asked again.
        const retried = await findAndRotate(
          counter.sql,
          rotationOf(waiting!.token, waiting!.family),
          waiting!.guard,
          anyUnrotated,
        );
        expect(retried.won).toBe(true);
      } finally {
        await lock.release();
      }
    });
  });
});
