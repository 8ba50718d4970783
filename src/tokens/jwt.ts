import { SignJWT } from 'jose';
import type { Clock } from '../domain/clock.js';
import { toEpochSeconds } from '../domain/clock.js';
import { randomAlphanumeric } from '../domain/ids.js';
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

/** Signs a JWT with the current signing key; `iat`, `nbf`, `exp` and a random `jti` are set from the clock. */
export async function signJwt(keys: SigningKeys, clock: Clock, o: SignOptions): Promise<string> {
  const key = await keys.signingKey();
  const now = toEpochSeconds(clock.now());
  return new SignJWT({ ...o.claims })
    .setProtectedHeader({ alg: key.alg, kid: key.kid, typ: o.typ })
    .setIssuer(o.issuer)
    .setSubject(o.subject)
    .setAudience(o.audience)
    .setIssuedAt(now)
    .setNotBefore(now)
    .setExpirationTime(now + o.lifetimeSeconds)
    .setJti(randomAlphanumeric(22))
    .sign(key.privateKey);
}
