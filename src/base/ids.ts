import { Buffer } from 'node:buffer';
import { randomFillSync } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Bytes at or above this are rejected so that every character is equally likely (248 = 4 × 62). */
const UNBIASED_LIMIT = 248;

/**
 * Random bytes drawn from a pooled buffer: one `randomFillSync` per 4 KiB instead of one call per id or secret, since
 * both are minted on every request (request ids, refresh tokens' salts). The bytes are as random as `randomBytes`
 * (each is handed out once); only the calls are batched: `randomBytes(32)` cost 6.5 µs here, most of it OpenSSL's
 * per-call fork check (a `getpid` system call) and the job around it. Node's `randomUUID` pools the same way.
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

/** `count` random bytes (at most the pool's size) in a buffer of their own. */
export function pooledRandomBytes(count: number): Buffer {
  if (count > pool.length) throw new RangeError(`at most ${pool.length} pooled random bytes at once`);
  if (poolOffset + count > pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  const bytes = Buffer.from(pool.subarray(poolOffset, poolOffset + count));
  poolOffset += count;
  return bytes;
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

/**
 * Digits and lowercase letters only: they sort alike in byte order and in PostgreSQL's usual collations (a mixed-case
 * alphabet would not: en_US puts `a` before `B`).
 */
const ORDERED_DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';
const SEQUENCE_WIDTH = 3;
const SEQUENCE_LIMIT = ORDERED_DIGITS.length ** SEQUENCE_WIDTH;

/** Fixed-width digits of `n` (most significant first) in ORDERED_DIGITS. */
function orderedDigits(n: number, width: number): string {
  let s = '';
  for (let i = 0; i < width; i++) {
    s = ORDERED_DIGITS[n % ORDERED_DIGITS.length]! + s;
    n = Math.floor(n / ORDERED_DIGITS.length);
  }
  return s;
}

let lastMs = -1;
let sequence = 0;

/**
 * A prefixed id that sorts, as a string, in the order this process made it: 9 characters of the time in ms, 3 of a
 * sequence within that millisecond, then 10 random (about 59 bits), 22 in all like `newId`. Two uses:
 * - rows listed by time whose ties must keep their order: a member's removal and the connections it ends are written
 *   in one millisecond;
 * - an agency's records (clients, projects, tasks, notes), wherever they are made: the write tools insert them at a
 *   high rate, and a new key lands at the right-hand end of its indexes, so the inserts of one commit dirty the same
 *   few pages. A random key dirties a different leaf of every index on it per row: `create_task` at 50 connections
 *   wrote ~8 MB/s of log, which the checkpoints then copied and synced beside the requests (docs/performance.md,
 *   lever 30).
 * The id says when the row was made, as its `created_at` does to anyone who may read it; the random part keeps it
 * unguessable. A clock that stands still or steps back keeps the last time and counts on (past the sequence's room,
 * the time part runs ahead by a millisecond), so ids never go backwards within the process.
 */
export function newOrderedId(prefix: IdPrefix, nowMs: number): string {
  if (nowMs > lastMs) {
    lastMs = nowMs;
    sequence = 0;
  } else if (++sequence === SEQUENCE_LIMIT) {
    lastMs++;
    sequence = 0;
  }
  const time = orderedDigits(Math.max(lastMs, 0), 9);
  return `${prefix}_${time}${orderedDigits(sequence, SEQUENCE_WIDTH)}${randomAlphanumeric(10)}`;
}
