import { generateKeyPair, jwtVerify } from 'jose';
import { describe, expect, it } from 'vitest';
import { signJwt } from '../../src/tokens/jwt.js';
import type { SigningKeys } from '../../src/tokens/signing-keys.js';
import { claimsOf } from '../helpers/tokens.js';

/**
 * The payload signJwt writes: the caller's claims first, then the registered claims (RFC 7519 §4.1), which win over a
 * claim of the same name, whatever way the payload object is built (it is not an object spread: lever 31 in
 * docs/performance.md).
 */

const NOW = 1_800_000_000_000;
// The service's keys are WebCrypto keys (signing-keys.ts), as jose makes them.
const { privateKey, publicKey } = await generateKeyPair('ES256');
const keys = { signingKey: async () => ({ alg: 'ES256', kid: 'k1', privateKey }) } as unknown as SigningKeys;
const clock = { now: () => NOW, monotonic: () => 0 };

/** An access token of usr_1 for the resource, valid 60 s, with the caller's `claims`. */
const signWith = (claims: Record<string, unknown>) =>
  signJwt(keys, clock, {
    typ: 'at+jwt',
    issuer: 'https://as.example',
    subject: 'usr_1',
    audience: 'https://rs.example/mcp',
    lifetimeSeconds: 60,
    claims,
  });

describe('signJwt', () => {
  it('writes the claims, then the registered claims, and signs with ES256', async () => {
    const token = await signWith({ client_id: 'cli_1', scope: 'a b' });
    const payload = claimsOf(token);
    expect(Object.keys(payload)).toEqual([
      'client_id',
      'scope',
      'iss',
      'sub',
      'aud',
      'iat',
      'nbf',
      'exp',
      'jti',
    ]);
    expect(payload).toMatchObject({
      client_id: 'cli_1',
      scope: 'a b',
      iss: 'https://as.example',
      sub: 'usr_1',
      aud: 'https://rs.example/mcp',
      iat: NOW / 1000,
      nbf: NOW / 1000,
      exp: NOW / 1000 + 60,
    });
    expect(payload.jti).toMatch(/^[A-Za-z0-9]{22}$/);
    const verified = await jwtVerify(token, publicKey, {
      issuer: 'https://as.example',
      typ: 'at+jwt',
      currentDate: new Date(NOW),
    });
    expect(verified.protectedHeader).toEqual({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' });
  });

  it('lets no claim of the caller replace a registered one', async () => {
    const token = await signWith({
      iss: 'https://evil.example',
      sub: 'usr_2',
      exp: NOW,
      jti: 'chosen',
      cid: 'con_1',
    });
    const payload = claimsOf(token);
    expect(payload).toMatchObject({
      iss: 'https://as.example',
      sub: 'usr_1',
      exp: NOW / 1000 + 60,
      cid: 'con_1',
    });
    expect(payload.jti).not.toBe('chosen');
  });

  it('does not change the claims object it is given', async () => {
    const claims = { scope: 'a' };
    await signWith(claims);
    expect(claims).toEqual({ scope: 'a' });
  });
});
