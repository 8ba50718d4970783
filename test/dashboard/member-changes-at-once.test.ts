import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  changeRole,
  MembershipError,
  type MemberRow,
  removeMember,
  setAgentWrite,
} from '../../src/domain/agencies.js';
import { activateGrant, createPendingConnection } from '../../src/domain/connections.js';
import { agencyIds, Browser } from '../auth/oauth-helpers.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { agentWriteEnabled, auditTypesOf } from '../helpers/rows.js';

/**
 * Two owners who change each other at the same moment. Each request finds its actor an owner; checked against that,
 * both changes passed and the agency was left with no owner, which no page can undo. A change is checked against the
 * memberships as they are when it commits: the second one finds its actor no longer an owner.
 */

let server: TestServer;
let northwind: string;
const members: Record<string, string> = {};

beforeAll(async () => {
  server = await startTestServer();
  northwind = (await agencyIds(server))['Northwind Studio']!;
  const rows = await server.services.ctx.db
    .selectFrom('members')
    .innerJoin('users', 'users.id', 'members.user_id')
    .select(['members.id', 'users.username'])
    .where('members.agency_id', '=', northwind)
    .execute();
  for (const r of rows) members[r.username] = r.id;
});
afterAll(() => server.close());

/** ada and grace both active owners of Northwind again. */
async function twoOwners(): Promise<void> {
  await server.services.ctx.db
    .updateTable('members')
    .set({ role: 'owner', status: 'active', removed_at: null })
    .where('id', 'in', [members['ada']!, members['grace']!])
    .execute();
}

const membership = (username: string): Promise<MemberRow> =>
  server.services.ctx.db
    .selectFrom('members')
    .selectAll()
    .where('id', '=', members[username]!)
    .executeTakeFirstOrThrow();

const count = async (query: { execute(): Promise<unknown[]> }): Promise<number> =>
  (await query.execute()).length;
const activeOwners = () =>
  count(
    server.services.ctx.db
      .selectFrom('members')
      .select('id')
      .where('agency_id', '=', northwind)
      .where('role', '=', 'owner')
      .where('status', '=', 'active'),
  );
const roleChanges = () =>
  count(
    server.services.ctx.db
      .selectFrom('audit_events')
      .select('id')
      .where('agency_id', '=', northwind)
      .where('type', '=', 'member.role_changed'),
  );

type Change = (actor: MemberRow, targetId: string) => Promise<unknown>;
const demote: Change = (actor, targetId) => changeRole(server.services.ctx, actor, targetId, 'viewer');
const remove: Change = (actor, targetId) => removeMember(server.services.ctx, actor, targetId);

describe(`two owners changing each other at once (${ENGINE})`, () => {
  it.each([
    ['demote each other', demote, demote],
    ['remove each other', remove, remove],
    ['one demotes, the other removes', demote, remove],
  ])(
    '%s, one after the other, each with its actor as its request found it: the second is refused',
    async (_, first, second) => {
      await twoOwners();
      const [ada, grace] = [await membership('ada'), await membership('grace')];
      await first(ada, grace.id);
      await expect(second(grace, ada.id)).rejects.toThrow(MembershipError);
      expect(await activeOwners()).toBe(1);
    },
  );

  it.each([
    ['demote each other', demote, demote],
    ['remove each other', remove, remove],
  ])('%s, both in flight: one wins, the agency keeps an owner', async (_, first, second) => {
    for (let round = 0; round < 10; round++) {
      await twoOwners();
      const [ada, grace] = [await membership('ada'), await membership('grace')];
      const outcomes = await Promise.allSettled([first(ada, grace.id), second(grace, ada.id)]);
      expect(outcomes.map((o) => o.status).sort()).toEqual(['fulfilled', 'rejected']);
      for (const o of outcomes) if (o.status === 'rejected') expect(o.reason).toBeInstanceOf(MembershipError);
      expect(await activeOwners()).toBe(1);
    }
  });

  it('a settings change by an owner demoted a moment before it is refused', async () => {
    await twoOwners();
    const [ada, grace] = [await membership('ada'), await membership('grace')];
    await demote(ada, grace.id);
    await expect(setAgentWrite(server.services.ctx, grace, false)).rejects.toThrow(MembershipError);
    expect(await agentWriteEnabled(server.services.ctx.db, northwind)).toBe(1);
  });

  it('through the Members page, both forms posted at once: one is done, the other refused with a page', async () => {
    const browsers: Record<string, Browser> = {};
    for (const u of ['ada', 'grace']) {
      browsers[u] = new Browser(server.url.auth);
      await browsers[u].signIn(u);
    }
    const post = (who: string, whom: string) =>
      browsers[who]!.post(`/dashboard/members/${members[whom]}/role`, {
        csrf: browsers[who]!.csrf,
        role: 'viewer',
      });
    const before = await roleChanges();
    for (let round = 0; round < 10; round++) {
      await twoOwners();
      const answers = await Promise.all([post('ada', 'grace'), post('grace', 'ada')]);
      expect(answers.map((r) => r.status).sort()).toEqual([303, 403]);
      const refused = answers.find((r) => r.status === 403)!;
      expect(await refused.text()).toContain('You may not manage members');
      expect(await activeOwners()).toBe(1);
    }
    // The history says one change a round, never two.
    expect((await roleChanges()) - before).toBe(10);
  });
});

describe(`a consent written while its member is removed (${ENGINE})`, () => {
  it('does not become a connection when its code is exchanged', async () => {
    const { db, clock } = server.services.ctx;
    const linus = await membership('linus');
    // The removal commits between the consent's membership check and its pending row: it ended linus's connections
    // before this one existed.
    const pending = await createPendingConnection(db, clock, {
      userId: linus.user_id,
      agencyId: northwind,
      memberId: linus.id,
      clientId: 'planner-bot',
      resource: `${server.url.agencyMcp}/mcp`,
      scopes: ['agency:mcp:read'],
      ceiling: ['clients:read'],
      pendingUntil: clock.now() + 60_000,
    });
    await db
      .updateTable('members')
      .set({ status: 'removed', removed_at: clock.now() })
      .where('id', '=', linus.id)
      .execute();
    expect(await activateGrant(db, clock, pending.id)).toBeUndefined();
    const row = await db
      .selectFrom('connections')
      .select(['status', 'revoke_reason'])
      .where('id', '=', pending.id)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'revoked', revoke_reason: 'member_removed' });
    // Nothing in the history says linus connected it.
    expect(await auditTypesOf(db, pending.id)).toEqual([]);
  });
});
