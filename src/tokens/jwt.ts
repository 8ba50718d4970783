import { Buffer } from 'node:buffer';
import { KeyObject, sign } from 'node:crypto';
import type { Clock } from '../base/clock.js';
import { toEpochSeconds } from '../base/clock.js';
import { randomAlphanumeric } from '../base/ids.js';
import type { SigningKeys } from './signing-keys.js';

/** JWT `typ` header values (RFC 8725 §3.11: explicit typing keeps one kind of token from passing as another). */
export const TOKEN_TYPES = {
  session: 'session+jwt',
  /** RFC 9068 §2.1 */
  access: 'at+jwt',
  dashboard: 'dashboard+jwt',
} as const;

export interface SignOptions {
  typ: string;
  issuer: string;
  subject: string;
  audience: string | string[];
  lifetimeSeconds: number;
  claims?: Record<string, unknown>;
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');
const keyObjects = new WeakMap<object, KeyObject>();

/**
 * Signs a JWT (RFC 7515 compact serialization) with the current signing key; `iat`, `nbf`, `exp` and a random `jti`
 * come from the clock. Every token the service issues is signed here, and verified by jose (`verifier.ts`).
 *
 * The signature is computed with node:crypto rather than jose: jose 6 signs through WebCrypto, which here cost
 * 600 µs per RS256 signature on one pinned core against 225 µs for `crypto.sign` — the difference between ~970 and
 * the 1,500 refresh rotations per second the authorization server must sustain (bench/refresh.mjs).
 */
export async function signJwt(keys: SigningKeys, clock: Clock, o: SignOptions): Promise<string> {
  const key = await keys.signingKey();
  let keyObject = keyObjects.get(key.privateKey);
  if (!keyObject) {
    keyObject = KeyObject.from(key.privateKey);
    keyObjects.set(key.privateKey, keyObject);
  }
  const now = toEpochSeconds(clock.now());
  const header = b64({ alg: key.alg, kid: key.kid, typ: o.typ });
  // `Object.assign`, not `{ ...o.claims, iss: … }`: on Node 20 (V8 11.3) every object made by a spread followed by
  // more members survives the young generation's collections and is promoted (docs/performance.md, lever 31).
  const payload = b64(
    Object.assign({}, o.claims, {
      iss: o.issuer,
      sub: o.subject,
      aud: o.audience,
      iat: now,
      nbf: now,
      exp: now + o.lifetimeSeconds,
      jti: randomAlphanumeric(22),
    }),
  );
  const input = `${header}.${payload}`;
  // RFC 7518 §3.3 (RS256: RSASSA-PKCS1-v1_5 with SHA-256) and §3.4 (ES256: R || S, not DER).
  const signature =
    key.alg === 'ES256' ? signEs256(input, keyObject) : await signOnThreadPool(input, keyObject);
  return `${input}.${signature.toString('base64url')}`;
}

/**
 * ES256 signs on the calling thread: 30 CPU µs here, against 48 µs (and a wake-up of the event loop) through the
 * thread pool, whose hand-off costs more than the signature.
 */
const signEs256 = (input: string, key: KeyObject): Buffer =>
  sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });

/** RS256 (286 µs here) signs on libuv's thread pool, so the event loop keeps serving while another core signs. */
const signOnThreadPool = (input: string, key: KeyObject): Promise<Buffer> =>
  new Promise((resolve, reject) =>
    sign('sha256', Buffer.from(input), key, (err, sig) => (err ? reject(err) : resolve(sig))),
  );
