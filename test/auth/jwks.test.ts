import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from 'jose';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { boundPort } from '../../src/config/config.js';
import { KEY_ACTIVATION_DELAY_MS, KEY_REFRESH_INTERVAL_MS } from '../../src/tokens/signing-keys.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const jwks = async () => {
  const res = await fetch(`${server.url.auth}/.well-known/jwks.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('cache-control')).toMatch(/max-age=\d+/);
  return (await res.json()) as JSONWebKeySet;
};
const me = (token: string) =>
  fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });

it('publishes public keys only, and they verify the tokens the server issues', async () => {
  const set = await jwks();
  expect(set.keys.length).toBeGreaterThanOrEqual(1);
  for (const key of set.keys) {
    expect(key).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256', use: 'sig' });
    expect(key.kid).toBeTruthy();
    for (const secret of ['d', 'p', 'q', 'dp', 'dq', 'qi']) expect(key).not.toHaveProperty(secret);
  }
  const { token } = await signIn(server, 'ada');
  const { payload, protectedHeader } = await jwtVerify(token, createLocalJWKSet(set), {
    issuer: server.url.auth,
    currentDate: new Date(server.clock.now()),
  });
  expect(protectedHeader.typ).toBe('session+jwt');
  expect(payload.aud).toContain(server.url.api);
});

it('rotates with overlap: old tokens keep working, new ones use the new key once it is published everywhere, the old key leaves after its tokens expire', async () => {
  const before = await signIn(server, 'ada');
  const oldKid = decodeProtectedHeader(before.token).kid!;
  const newKid = await server.services.ctx.keys.rotate();
  expect(newKid).not.toBe(oldKid);

  const kids = (await jwks()).keys.map((k) => k.kid);
  expect(kids).toEqual(expect.arrayContaining([oldKid, newKid]));
  expect((await me(before.token)).status).toBe(200);

  // Until every instance has had time to publish it, the new key does not sign.
  expect(decodeProtectedHeader((await signIn(server, 'ada')).token).kid).toBe(oldKid);
  server.clock.advance(KEY_ACTIVATION_DELAY_MS);
  const after = await signIn(server, 'ada');
  expect(decodeProtectedHeader(after.token).kid).toBe(newKid);
  expect((await me(after.token)).status).toBe(200);

  // Past the longest life of a token the old key signed (and the key table's refresh interval), it is unpublished.
  server.clock.advance(server.config.sessionTtlSeconds * 1000 + 61_000);
  expect((await jwks()).keys.map((k) => k.kid)).not.toContain(oldKid);
});

it(`keys across instances (${ENGINE}): a rotation is published everywhere before any instance signs with it`, async () => {
  // Two instances behind one public URL, sharing the database; each has its own clock here.
  const a = await startTestServer();
  const b = await startTestServer({ sharing: a, env: { AUTH_URL: a.url.auth, BASE_URL: a.url.api } });
  try {
    const jwksOf = async (s: TestServer) => (await s.services.ctx.keys.jwks()).keys.map((k) => k.kid);
    expect(await jwksOf(b)).toEqual(await jwksOf(a));
    expect(await jwksOf(a)).toHaveLength(1);
    const newKid = await a.services.ctx.keys.rotate();
    // B picks the new key up within the refresh interval, long before anyone signs with it.
    b.clock.advance(KEY_REFRESH_INTERVAL_MS + 1);
    expect(await jwksOf(b)).toContain(newKid);
    // A signs with it once it is active; B accepts that token without a refusal window.
    a.clock.advance(KEY_ACTIVATION_DELAY_MS);
    b.clock.advance(KEY_ACTIVATION_DELAY_MS);
    const token = (await signIn(a, 'ada')).token;
    expect(decodeProtectedHeader(token).kid).toBe(newKid);
    const me = await fetch(`http://127.0.0.1:${boundPort(b.config, 'api')}/me`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(me.status).toBe(200);
    // And B signs with the same key as A.
    expect((await b.services.ctx.keys.signingKey()).kid).toBe(newKid);
  } finally {
    await b.close();
    await a.close();
  }
});

it('carries an ETag a verifier revalidates with: 304 while the keys are the same, the new set once they rotate, cross-origin too', async () => {
  const url = `${server.url.auth}/.well-known/jwks.json`;
  const first = await fetch(url);
  const etag = first.headers.get('etag')!;
  expect(etag).toMatch(/^"[\w-]+"$/);
  expect(first.headers.get('content-type')).toBe('application/json; charset=utf-8');
  expect(first.headers.get('access-control-expose-headers')).toMatch(/\betag\b/i);

  for (const ifNoneMatch of [etag, `W/${etag}`, `"other", ${etag}`]) {
    const again = await fetch(url, { headers: { 'if-none-match': ifNoneMatch } });
    expect(again.status).toBe(304);
    expect(again.headers.get('etag')).toBe(etag);
    expect(await again.text()).toBe('');
  }
  // If-None-Match is not a CORS-safelisted request header: a browser asks first (Fetch standard §4.8).
  const preflight = await fetch(url, {
    method: 'OPTIONS',
    headers: {
      origin: 'https://verifier.example',
      'access-control-request-method': 'GET',
      'access-control-request-headers': 'if-none-match',
    },
  });
  expect(preflight.status).toBe(204);
  expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
  expect(preflight.headers.get('access-control-allow-headers')).toMatch(/\bif-none-match\b/i);

  const newKid = await server.services.ctx.keys.rotate();
  const rotated = await fetch(url, { headers: { 'if-none-match': etag } });
  expect(rotated.status).toBe(200);
  expect(rotated.headers.get('etag')).not.toBe(etag);
  expect(((await rotated.json()) as JSONWebKeySet).keys.map((k) => k.kid)).toContain(newKid);
});
