import type { Kysely } from 'kysely';
import type { Database } from '../store/schema.js';
import type { Clock } from './clock.js';
import { createUser } from './users.js';

/** DESIGN §7: the demo accounts. Published passwords, so never seeded in production. */
export const DEMO_USERS = [
  { username: 'ada', password: 'ada-demo-password' },
  { username: 'grace', password: 'grace-demo-password' },
  { username: 'linus', password: 'linus-demo-password' },
] as const;

export class DemoSeedRefused extends Error {
  override name = 'DemoSeedRefused';
}

/** Seeds the demo data. Idempotent: accounts that exist are left as they are. */
export async function seedDemo(db: Kysely<Database>, clock: Clock, production: boolean): Promise<string[]> {
  if (production)
    throw new DemoSeedRefused('The demo seed has published passwords and is never run in production');
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
  return created;
}

export async function isEmpty(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('users').select('id').limit(1).executeTakeFirst()) === undefined;
}
