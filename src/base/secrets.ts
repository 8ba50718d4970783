import { createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** A random secret of 256 bits, base64url (codes, refresh tokens, CSRF tokens). */
export const randomSecret = (bytes = 32): string => randomBytes(bytes).toString('base64url');

/** What is stored instead of a secret: its SHA-256 (the secrets are 256-bit random, so no salt or stretching). */
export const hashSecret = (secret: string): string => createHash('sha256').update(secret).digest('base64url');

/** Compares two strings in constant time (for equal lengths; the length itself is not secret here). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** HMAC-SHA256 of `message` keyed by `key`, base64url. */
export const hmac = (key: string, message: string): string =>
  createHmac('sha256', key).update(message).digest('base64url');
