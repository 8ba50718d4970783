import type { Kysely } from 'kysely';
import type { Database, UsersTable } from '../store/schema.js';
import type { Clock } from '../base/clock.js';
import { newId } from '../base/ids.js';
import { hashPassword, MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, verifyPassword } from './passwords.js';

export type UserRow = UsersTable;

/** Public handle: lower-case letters, digits, `.`, `_`, `-`; 2–39 characters, starting with a letter or digit. */
export const USERNAME_PATTERN = /^[a-z0-9][a-z0-9._-]{1,38}$/;

/**
 * A username as typed at sign-in, in the form usernames are stored in: without the spaces around it and in lower case.
 * Phones capitalise a field's first letter and add a space after a suggested word, and a password manager keeps what
 * was typed; every username is lower-case ASCII (USERNAME_PATTERN), so no two differ by case alone. Only A–Z are
 * folded: Unicode's case mapping turns some other letters into ASCII ones (the Kelvin sign K into k), which would give
 * a username, and its sign-in limits, spellings that no one types.
 */
export const canonicalUsername = (typed: string): string =>
  typed.trim().replace(/[A-Z]/g, (letter) => letter.toLowerCase());

export class UserInputError extends Error {
  override name = 'UserInputError';
  constructor(
    readonly param: string,
    message: string,
  ) {
    super(message);
  }
}

export interface NewUser {
  username: string;
  password: string;
  imageUrl?: string | null;
  apiVersion?: string | null;
}

function checkPasswordLength(password: string): void {
  if (password.length < MIN_PASSWORD_LENGTH || password.length > MAX_PASSWORD_LENGTH) {
    throw new UserInputError(
      'password',
      `password must be ${MIN_PASSWORD_LENGTH} to ${MAX_PASSWORD_LENGTH} characters`,
    );
  }
}

/** Replaces a user's password (its hash), within the bounds a new user's has. */
export async function setPassword(db: Kysely<Database>, userId: string, password: string): Promise<void> {
  checkPasswordLength(password);
  await db
    .updateTable('users')
    .set({ password_hash: await hashPassword(password) })
    .where('id', '=', userId)
    .execute();
}

export async function createUser(db: Kysely<Database>, clock: Clock, input: NewUser): Promise<UserRow> {
  if (!USERNAME_PATTERN.test(input.username)) {
    throw new UserInputError('username', 'username must be 2–39 lower-case letters, digits, ".", "_" or "-"');
  }
  checkPasswordLength(input.password);
  if (input.imageUrl != null && !/^https?:\/\//.test(input.imageUrl)) {
    throw new UserInputError('image_url', 'image_url must be an http(s) URL');
  }
  const row: UserRow = {
    id: newId('usr'),
    username: input.username,
    image_url: input.imageUrl ?? null,
    password_hash: await hashPassword(input.password),
    api_version: input.apiVersion ?? null,
    created_at: clock.now(),
  };
  const existing = await findUserByUsername(db, input.username);
  if (existing) throw new UserInputError('username', `username ${input.username} is taken`);
  await db.insertInto('users').values(row).execute();
  return row;
}

export function findUserById(db: Kysely<Database>, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

export function findUserByUsername(db: Kysely<Database>, username: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('username', '=', username).executeTakeFirst();
}

/** A password check: the user when it matched; otherwise the user the username names, if any (for the log only). */
export type PasswordCheck =
  { user: UserRow; known?: never } | { user?: undefined; known: UserRow | undefined };

/** Checks a password; takes the same time whether or not the username exists. */
export async function checkPassword(
  db: Kysely<Database>,
  username: string,
  password: string,
): Promise<PasswordCheck> {
  const user = await findUserByUsername(db, username);
  const ok = await verifyPassword(user?.password_hash, password);
  return ok && user ? { user } : { known: user };
}
