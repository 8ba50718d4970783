import { randomFillSync } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Bytes at or above this are rejected so that every character is equally likely (248 = 4 × 62). */
const UNBIASED_LIMIT = 248;

/**
 * Random bytes drawn from a pooled buffer: one `randomFillSync` per 4 KiB instead of one per id, since ids are minted
 * on every request (request ids). The bytes are as random as `randomBytes`; only the system calls are batched.
 */
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

const ALPHABET_BYTES = Buffer.from(ALPHABET, 'latin1');
/** Reused for every string: each is copied out by `toString` before the next is drawn. */
const scratch = Buffer.alloc(64);

/**
 * A random alphanumeric string of `length` characters (about 5.95 bits each). Written as bytes and read back as one
 * flat string: appending 22 characters one at a time made a chain of string pieces that V8 then flattened when the
 * id was written to a socket (request ids: ~3 % of a fast-path `GET /me`, perf).
 */
export function randomAlphanumeric(length: number): string {
  const out = length <= scratch.length ? scratch : Buffer.alloc(length);
  let n = 0;
  while (n < length) {
    const byte = randomByte();
    if (byte < UNBIASED_LIMIT) out[n++] = ALPHABET_BYTES[byte % 62]!;
  }
  return out.toString('latin1', 0, length);
}

export type IdPrefix =
  'usr' | 'ses' | 'web' | 'agy' | 'mem' | 'cli' | 'prj' | 'tsk' | 'not' | 'con' | 'evt' | 'key' | 'req';

/** A prefixed id such as `usr_3kTMd9...`: 22 random characters, about 131 bits. */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomAlphanumeric(22)}`;
}
