import { randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Bytes at or above this are rejected so that every character is equally likely (248 = 4 × 62). */
const UNBIASED_LIMIT = 248;

/** A random alphanumeric string of `length` characters (about 5.95 bits each). */
export function randomAlphanumeric(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < UNBIASED_LIMIT) out += ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

export type IdPrefix =
  | 'usr'
  | 'ses'
  | 'agy'
  | 'mem'
  | 'cli'
  | 'prj'
  | 'tsk'
  | 'not'
  | 'con'
  | 'evt'
  | 'key'
  | 'req';

/** A prefixed id such as `usr_3kTMd9...`: 22 random characters, about 131 bits. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomAlphanumeric(22)}`;
}
