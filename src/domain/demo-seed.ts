import type { Kysely, Transaction } from 'kysely';
import { LOCK_KEYS, withExclusiveLock } from '../store/exclusive.js';
import type { Database } from '../store/schema.js';
import { addMember, createAgency } from './agencies.js';
import type { Clock } from '../base/clock.js';
import { newOrderedId } from '../base/ids.js';
import type { Role } from './permissions.js';
import { createUser } from './users.js';

/** docs/contract.md#demo-and-local-use: the demo accounts. Published passwords, so never seeded in production. */
export const DEMO_USERS = [
  { username: 'ada', password: 'ada-demo-password' },
  { username: 'grace', password: 'grace-demo-password' },
  { username: 'linus', password: 'linus-demo-password' },
] as const;

export class DemoSeedRefused extends Error {
  override name = 'DemoSeedRefused';
}

/**
 * Seeds the demo data. Idempotent, and safe when several processes seed one empty database at once (instances starting
 * together, two `svc seed-demo`): the whole seed runs in one transaction holding an exclusive lock, so the second
 * finds the first's accounts and leaves them as they are.
 */
export async function seedDemo(db: Kysely<Database>, clock: Clock, production: boolean): Promise<string[]> {
  if (production)
    throw new DemoSeedRefused('The demo seed has published passwords and is never run in production');
  return withExclusiveLock(db, LOCK_KEYS.demoSeed, (trx) => seedUnderLock(trx, clock));
}

async function seedUnderLock(db: Transaction<Database>, clock: Clock): Promise<string[]> {
  const created: string[] = [];
  for (const u of DEMO_USERS) {
    const exists = await db
      .selectFrom('users')
      .select('id')
      .where('username', '=', u.username)
      .executeTakeFirst();
    if (exists) continue;
    await createUser(db, clock, { username: u.username, password: u.password });
    created.push(u.username);
  }
  await seedAgencies(db, clock);
  return created;
}

/** docs/contract.md#demo-and-local-use: the demo agencies, their members and a little data for the tools to work on. */
const DEMO_AGENCIES: {
  name: string;
  plan: string;
  agentWrite: boolean;
  members: [string, Role][];
  clients: { name: string; email: string; projects: { name: string; tasks: string[] }[] }[];
}[] = [
  {
    name: 'Northwind Studio',
    plan: 'studio',
    agentWrite: true,
    members: [
      ['ada', 'owner'],
      ['grace', 'manager'],
      ['linus', 'viewer'],
    ],
    clients: [
      {
        name: 'Acme Bakery',
        email: 'hello@acme-bakery.example',
        projects: [
          { name: 'Spring menu site', tasks: ['Draft page copy', 'Photograph pastries', 'Launch checklist'] },
        ],
      },
      {
        name: 'Globex Outfitters',
        email: 'ops@globex.example',
        projects: [
          { name: 'Catalogue refresh', tasks: ['Collect product photos', 'Review pricing table'] },
          { name: 'Newsletter', tasks: ['Write October issue'] },
        ],
      },
    ],
  },
  {
    name: 'Blue Harbor',
    plan: 'starter',
    agentWrite: false,
    members: [['ada', 'viewer']],
    clients: [
      {
        name: 'Harbor Marine Supply',
        email: 'desk@harbor-marine.example',
        projects: [{ name: 'Dock signage', tasks: ['Measure piers'] }],
      },
    ],
  },
];

async function seedAgencies(db: Kysely<Database>, clock: Clock): Promise<void> {
  for (const a of DEMO_AGENCIES) {
    const exists = await db.selectFrom('agencies').select('id').where('name', '=', a.name).executeTakeFirst();
    if (exists) continue;
    const agency = await createAgency(db, clock, {
      name: a.name,
      plan: a.plan,
      agentWriteEnabled: a.agentWrite,
    });
    const memberIds: string[] = [];
    for (const [username, role] of a.members) {
      const user = await db
        .selectFrom('users')
        .select('id')
        .where('username', '=', username)
        .executeTakeFirstOrThrow();
      memberIds.push((await addMember(db, clock, { agencyId: agency.id, userId: user.id, role })).id);
    }
    const now = clock.now();
    for (const c of a.clients) {
      const clientId = newOrderedId('cli', now);
      await db
        .insertInto('clients')
        .values({
          id: clientId,
          agency_id: agency.id,
          name: c.name,
          email: c.email,
          status: 'active',
          created_at: now,
          updated_at: now,
        })
        .execute();
      for (const p of c.projects) {
        const projectId = newOrderedId('prj', now);
        await db
          .insertInto('projects')
          .values({
            id: projectId,
            agency_id: agency.id,
            client_id: clientId,
            name: p.name,
            status: 'active',
            due_on: null,
            created_at: now,
            updated_at: now,
          })
          .execute();
        for (const [i, title] of p.tasks.entries()) {
          await db
            .insertInto('tasks')
            .values({
              id: newOrderedId('tsk', now),
              agency_id: agency.id,
              project_id: projectId,
              title,
              status: i === 0 ? 'in_progress' : 'todo',
              assignee_member_id: memberIds[i % memberIds.length] ?? null,
              due_on: null,
              created_at: now,
              updated_at: now,
            })
            .execute();
        }
      }
    }
  }
}

export async function isEmpty(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('users').select('id').limit(1).executeTakeFirst()) === undefined;
}
