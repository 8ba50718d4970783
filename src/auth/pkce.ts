import { createHash } from 'node:crypto';
import { safeEqual } from '../base/secrets.js';

/** RFC 7636 §4.1: code_verifier = 43*128unreserved. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
/** RFC 7636 §4.2: an S256 challenge is BASE64URL(SHA256(verifier)) without padding: exactly 43 characters. */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export const PKCE_METHODS = ['S256'] as const;

export const isS256Challenge = (challenge: string): boolean => S256_CHALLENGE.test(challenge);
export const isVerifier = (verifier: string): boolean => VERIFIER.test(verifier);

/** RFC 7636 §4.6: BASE64URL-ENCODE(SHA256(ASCII(code_verifier))) == code_challenge, compared in constant time. */
export function verifyS256(verifier: string, challenge: string): boolean {
  if (!isVerifier(verifier)) return false;
  return safeEqual(createHash('sha256').update(verifier, 'ascii').digest('base64url'), challenge);
}
