import { generateKeyPairSync, sign } from 'node:crypto';
import { errors, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { type JwtCheck, verifyJwt } from '../../src/tokens/jwt-verify.js';
import { headerOf } from '../helpers/tokens.js';

/**
 * node:crypto verification against jose's `jwtVerify` with the verifier's options: the same outcome (the same refusal
 * and message, as the verifier maps jose's errors) for every kind of good and bad token.
 */

const ISSUER = 'https://as.example';
const NOW = 1_800_000_000_000;
const now = NOW / 1000;
const REQUIRED = ['sub', 'exp', 'iat', 'sid'];

const b64 = (v: unknown) => Buffer.from(typeof v === 'string' ? v : JSON.stringify(v)).toString('base64url');

function keysFor(alg: 'ES256' | 'RS256') {
  const pair =
    alg === 'ES256'
      ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
      : generateKeyPairSync('rsa', { modulusLength: 2048 });
  return pair;
}

function token(
  keys: ReturnType<typeof keysFor>,
  alg: string,
  payload: unknown,
  header: Record<string, unknown> = {},
): string {
  const input = `${b64({ alg, typ: 'session+jwt', kid: 'k', ...header })}.${b64(payload)}`;
  const dsa = alg === 'ES256' ? { dsaEncoding: 'ieee-p1363' as const } : {};
  const signature = sign('sha256', Buffer.from(input), { key: keys.privateKey, ...dsa });
  return `${input}.${signature.toString('base64url')}`;
}

/** jose's outcome, mapped as the verifier mapped it before it verified with node:crypto. */
async function withJose(jwt: string, keys: ReturnType<typeof keysFor>, alg: string): Promise<JwtCheck> {
  try {
    const { payload } = await jwtVerify(jwt, keys.publicKey, {
      issuer: ISSUER,
      algorithms: [alg],
      currentDate: new Date(NOW),
      requiredClaims: REQUIRED,
    });
    return { ok: true, payload };
  } catch (e) {
    if (e instanceof errors.JWTExpired)
      return { ok: false, failure: 'expired', message: 'The access token expired' };
    if (e instanceof errors.JWTClaimValidationFailed) {
      if (e.claim === 'nbf' || e.claim === 'iat')
        return { ok: false, failure: 'not_yet_valid', message: 'The access token is not valid yet' };
      if (e.claim === 'iss')
        return { ok: false, failure: 'invalid', message: 'The access token was issued by another issuer' };
      return { ok: false, failure: 'invalid', message: `The access token's ${e.claim} claim is invalid` };
    }
    if (e instanceof errors.JWSSignatureVerificationFailed)
      return { ok: false, failure: 'invalid', message: 'The access token signature is invalid' };
    return { ok: false, failure: 'invalid', message: 'The access token is invalid' };
  }
}

const good = { iss: ISSUER, sub: 'usr_1', sid: 'ses_1', iat: now - 10, nbf: now - 10, exp: now + 60 };
const without = (claim: keyof typeof good) =>
  Object.fromEntries(Object.entries(good).filter(([k]) => k !== claim));

const CASES: [
  string,
  (keys: ReturnType<typeof keysFor>, other: ReturnType<typeof keysFor>, alg: string) => string,
][] = [
  ['a good token', (k, _o, alg) => token(k, alg, good)],
  ['expired', (k, _o, alg) => token(k, alg, { ...good, exp: now })],
  ['not valid yet', (k, _o, alg) => token(k, alg, { ...good, nbf: now + 1 })],
  [
    'nbf in the future and exp not a number',
    (k, _o, alg) => token(k, alg, { ...good, nbf: now + 5, exp: 'x' }),
  ],
  ['another issuer', (k, _o, alg) => token(k, alg, { ...good, iss: 'https://other.example' })],
  ['no issuer', (k, _o, alg) => token(k, alg, without('iss'))],
  ['no sid', (k, _o, alg) => token(k, alg, without('sid'))],
  ['no iat', (k, _o, alg) => token(k, alg, without('iat'))],
  ['no sid and no sub', (k, _o, alg) => token(k, alg, { iss: ISSUER, iat: now, exp: now + 5 })],
  ['iat not a number', (k, _o, alg) => token(k, alg, { ...good, iat: '1' })],
  ['exp not a number', (k, _o, alg) => token(k, alg, { ...good, exp: '1' })],
  ['signed by another key', (_k, o, alg) => token(o, alg, good)],
  [
    'a payload changed after signing',
    (k, _o, alg) => {
      const [h, , s] = token(k, alg, good).split('.');
      return `${h}.${b64({ ...good, sub: 'usr_2' })}.${s}`;
    },
  ],
  ['a truncated signature', (k, _o, alg) => token(k, alg, good).slice(0, -4)],
  ['a payload that is an array', (k, _o, alg) => token(k, alg, [good])],
  ['a payload that is not JSON', (k, _o, alg) => token(k, alg, 'not json')],
  ['a critical header', (k, _o, alg) => token(k, alg, good, { crit: ['exp'], exp: 1 })],
];

describe.each(['ES256', 'RS256'] as const)('%s: the same outcome as jose', (alg) => {
  const keys = keysFor(alg);
  const other = keysFor(alg);
  it.each(CASES)('%s', async (_name, make) => {
    const jwt = make(keys, other, alg);
    const header = headerOf(jwt);
    const ours = verifyJwt(jwt, header, keys.publicKey, {
      alg,
      issuer: ISSUER,
      now: NOW,
      requiredClaims: REQUIRED,
    });
    expect(ours).toEqual(await withJose(jwt, keys, alg));
  });
});

describe('the leeway for clocks that differ (RFC 7519 §4.1.5)', () => {
  const keys = keysFor('ES256');
  const check = (payload: Record<string, unknown>, nbfLeewayMs?: number) => {
    const jwt = token(keys, 'ES256', payload);
    const header = headerOf(jwt);
    return verifyJwt(jwt, header, keys.publicKey, {
      alg: 'ES256',
      issuer: ISSUER,
      now: NOW,
      requiredClaims: REQUIRED,
      nbfLeewayMs,
    });
  };
  const claims = { iss: ISSUER, sub: 'usr_1', sid: 'ses_1', iat: now, exp: now + 60 };

  it('takes a token whose nbf is within the leeway ahead, and refuses one beyond it', () => {
    expect(check({ ...claims, nbf: now + 30 }, 60_000).ok).toBe(true);
    expect(check({ ...claims, nbf: now + 61 }, 60_000)).toMatchObject({
      ok: false,
      failure: 'not_yet_valid',
    });
    expect(check({ ...claims, nbf: now + 1 })).toMatchObject({ ok: false, failure: 'not_yet_valid' });
  });

  it('never lengthens a life: exp has no leeway', () => {
    expect(check({ ...claims, exp: now }, 60_000)).toMatchObject({ ok: false, failure: 'expired' });
  });
});
