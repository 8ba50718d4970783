import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/base/clock.js';
import { audit, listAuditHistory } from '../../src/domain/audit.js';
import { seedDemo } from '../../src/domain/demo-seed.js';
import type { Store } from '../../src/store/database.js';
import { migrateToLatest } from '../../src/store/migrate.js';
import { ENGINE, freshStore } from '../helpers/harness.js';
import { connectionRow } from '../helpers/rows.js';

/**
 * The History page's query (domain/audit.ts) on the suite's engine: the names it reads by each event's ids, the
 * client from the connection or, once the connection row is gone, from the event's own detail, newest first with
 * same-millisecond events in the order they were written, the member filter and the page size.
 */
describe(`audit history (${ENGINE})`, () => {
  let store: Store;
  let close: () => Promise<void>;
  const clock = new ManualClock(Date.parse('2026-11-25T00:00:00Z'));
  let northwind: string;
  let blueHarbor: string;
  let member: Record<'ada' | 'grace' | 'linus', string>;
  let user: Record<'ada' | 'grace' | 'linus', string>;

  beforeAll(async () => {
    ({ store, close } = await freshStore());
    await migrateToLatest(store.db);
    await seedDemo(store.db, clock, false);
    const agencies = await store.db.selectFrom('agencies').select(['id', 'name']).execute();
    northwind = agencies.find((a) => a.name === 'Northwind Studio')!.id;
    blueHarbor = agencies.find((a) => a.name === 'Blue Harbor')!.id;
    const rows = await store.db
      .selectFrom('members')
      .innerJoin('users', 'users.id', 'members.user_id')
      .select(['members.id as member_id', 'users.id as user_id', 'users.username'])
      .where('members.agency_id', '=', northwind)
      .execute();
    const by = (name: string) => rows.find((r) => r.username === name)!;
    member = { ada: by('ada').member_id, grace: by('grace').member_id, linus: by('linus').member_id };
    user = { ada: by('ada').user_id, grace: by('grace').user_id, linus: by('linus').user_id };
    await store.db
      .insertInto('connections')
      .values(
        connectionRow(
          {
            id: 'con_history_live',
            user_id: user.grace,
            agency_id: northwind,
            member_id: member.grace,
            client_id: 'dcr_live_client',
          },
          clock.now(),
        ),
      )
      .execute();
    const event = (o: Parameters<typeof audit>[2]) => audit(store.db, clock, o);
    await event({
      type: 'connection.created',
      agencyId: northwind,
      actorUserId: user.grace,
      memberId: member.grace,
      connectionId: 'con_history_live',
    });
    clock.advance(1000);
    // The connection row of this one is gone (deleted with its user, say): its client is the one the event recorded.
    await event({
      type: 'connection.revoked',
      agencyId: northwind,
      actorUserId: user.linus,
      memberId: member.linus,
      connectionId: 'con_history_gone',
      detail: { reason: 'disconnected', client_id: 'dcr_gone_client' },
    });
    clock.advance(1000);
    // Two events in the same millisecond: listed newest first, the second written above the first.
    await event({
      type: 'member.role_changed',
      agencyId: northwind,
      actorUserId: user.ada,
      memberId: member.grace,
      detail: { from: 'manager', to: 'viewer' },
    });
    await event({
      type: 'agency.agent_write_changed',
      agencyId: northwind,
      actorUserId: user.ada,
      detail: { enabled: false },
    });
    await event({
      type: 'agency.agent_write_changed',
      agencyId: blueHarbor,
      actorUserId: user.ada,
      detail: { enabled: true },
    });
  });
  afterAll(() => close?.());

  it("lists the agency's events newest first, with the actor's and the member's usernames and the client", async () => {
    const events = await listAuditHistory(store.db, { agencyId: northwind });
    expect(events.map((e) => [e.type, e.actor_username, e.member_username, e.client_id])).toEqual([
      ['agency.agent_write_changed', 'ada', null, null],
      ['member.role_changed', 'ada', 'grace', null],
      ['connection.revoked', 'linus', 'linus', 'dcr_gone_client'],
      ['connection.created', 'grace', 'grace', 'dcr_live_client'],
    ]);
    expect(events.every((e) => e.agency_id === northwind)).toBe(true);
  });

  it("keeps to one member's events with memberId, and to the page size with limit", async () => {
    const graces = await listAuditHistory(store.db, { agencyId: northwind, memberId: member.grace });
    expect(graces.map((e) => e.type)).toEqual(['member.role_changed', 'connection.created']);
    const page = await listAuditHistory(store.db, { agencyId: northwind, limit: 2 });
    expect(page.map((e) => e.type)).toEqual(['agency.agent_write_changed', 'member.role_changed']);
  });
});
