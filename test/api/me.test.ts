import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { urls } from '../../src/config/urls.js';
import { signIn, startTestServer, type TestServer, userId } from '../helpers/harness.js';
import { OpenApiChecker } from '../helpers/openapi.js';
import { rawRequest } from '../helpers/raw-http.js';
import {
  baseClaims,
  hs256WithPublicKey,
  mintAccessToken,
  signedByUnknownKey,
  signWithServerKey,
  TOKEN_TYPES,
  unsignedToken,
} from '../helpers/tokens.js';

let server: TestServer;
let openapi: OpenApiChecker;
let session: { id: string; token: string };
let adaId: string;

beforeAll(async () => {
  server = await startTestServer();
  openapi = await OpenApiChecker.fetch(server.url.api);
  session = await signIn(server, 'ada');
  adaId = await userId(server);
});
afterAll(() => server.close());

const me = (authorization?: string, extra: Record<string, string> = {}) =>
  fetch(`${server.url.api}/me`, { headers: { ...(authorization ? { authorization } : {}), ...extra } });

/** Asserts a 401 in the docs/contract.md#errors shape with an RFC 6750 challenge, and returns the error object. */
async function expect401(res: Response, code: string, rfc6750?: string) {
  expect(res.status).toBe(401);
  const body = (await openapi.check('GET', '/me', res)) as { error: Record<string, string> };
  expect(body.error).toMatchObject({ type: 'authentication_error', code });
  expect(body.error['request_id']).toBe(res.headers.get('x-request-id'));
  const challenge = res.headers.get('www-authenticate') ?? '';
  expect(challenge.startsWith('Bearer')).toBe(true);
  if (rfc6750) expect(challenge).toContain(`error="${rfc6750}"`);
  else expect(challenge).not.toContain('error=');
  expect(res.headers.get('svc-version')).toBe('2026-09-24.albus');
  return body.error;
}

describe('GET /me with a session token', () => {
  it('returns the user who owns the token, with the version and request id headers', async () => {
    const res = await me(`Bearer ${session.token}`);
    expect(res.status).toBe(200);
    const body = await openapi.check('GET', '/me', res);
    expect(body).toEqual({ object: 'user', id: adaId, username: 'ada', image_url: null });
    expect(res.headers.get('svc-version')).toBe('2026-09-24.albus');
    expect(res.headers.get('vary')).toContain('Svc-Version');
    expect(res.headers.get('x-request-id')).toMatch(/^req_[A-Za-z0-9]{22}$/);
  });

  it('treats the scheme name case-insensitively', async () => {
    for (const scheme of ['bearer', 'BEARER', 'BeArEr']) {
      expect((await me(`${scheme} ${session.token}`)).status).toBe(200);
    }
  });

  it('gives each request its own id', async () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5; i++) ids.add((await me(`Bearer ${session.token}`)).headers.get('x-request-id')!);
    expect(ids.size).toBe(5);
  });

  it('shows another user only their own profile', async () => {
    const grace = await signIn(server, 'grace');
    const body = (await (await me(`Bearer ${grace.token}`)).json()) as { username: string };
    expect(body.username).toBe('grace');
  });
});

describe('GET /me refuses bad credentials with 401', () => {
  it('no Authorization header: no error code in the challenge (RFC 6750 §3.1)', async () => {
    await expect401(await me(), 'missing_token');
  });

  it('no scheme', async () => {
    await expect401(await me(session.token), 'invalid_authorization_header', 'invalid_request');
  });

  it('another scheme', async () => {
    await expect401(
      await me(`Basic ${Buffer.from('ada:x').toString('base64')}`),
      'invalid_authorization_header',
      'invalid_request',
    );
  });

  it('two tokens in one header', async () => {
    await expect401(
      await me(`Bearer ${session.token} ${session.token}`),
      'invalid_authorization_header',
      'invalid_request',
    );
    await expect401(
      await me(`Bearer ${session.token}, Bearer ${session.token}`),
      'invalid_authorization_header',
      'invalid_request',
    );
  });

  it('two Authorization headers', async () => {
    const res = await rawRequest(`${server.url.api}/me`, {
      headers: [
        ['Authorization', `Bearer ${session.token}`],
        ['Authorization', `Bearer ${session.token}`],
      ],
    });
    expect(res.status).toBe(401);
    expect((res.json() as { error: { code: string } }).error.code).toBe('invalid_authorization_header');
  });

  it('empty token', async () => {
    await expect401(await me('Bearer '), 'invalid_authorization_header', 'invalid_request');
    await expect401(await me('Bearer'), 'invalid_authorization_header', 'invalid_request');
  });

  it('not a JWT', async () => {
    await expect401(await me('Bearer abc.def'), 'invalid_token', 'invalid_token');
  });

  it('alg: none', async () => {
    const claims = baseClaims(server.services.ctx, adaId, server.url.api, session.id);
    await expect401(
      await me(`Bearer ${unsignedToken(claims, TOKEN_TYPES.session)}`),
      'invalid_token',
      'invalid_token',
    );
  });

  it('HS256 signed with the public key (algorithm confusion)', async () => {
    const claims = baseClaims(server.services.ctx, adaId, server.url.api, session.id);
    const token = await hs256WithPublicKey(server.services.ctx, claims, TOKEN_TYPES.session);
    await expect401(await me(`Bearer ${token}`), 'invalid_token', 'invalid_token');
  });

  it('unknown kid', async () => {
    const claims = baseClaims(server.services.ctx, adaId, server.url.api, session.id);
    await expect401(
      await me(`Bearer ${await signedByUnknownKey(claims, TOKEN_TYPES.session)}`),
      'invalid_token',
      'invalid_token',
    );
  });

  it('a tampered signature', async () => {
    const [h, p, s] = session.token.split('.');
    const flipped = `${h}.${p}.${s!.slice(0, -4)}${s!.slice(-4) === 'AAAA' ? 'BBBB' : 'AAAA'}`;
    await expect401(await me(`Bearer ${flipped}`), 'invalid_token', 'invalid_token');
  });

  it('wrong iss', async () => {
    const ctx = server.services.ctx;
    const claims = { ...baseClaims(ctx, adaId, server.url.api, session.id), iss: 'https://evil.example' };
    const token = await signWithServerKey(ctx, { typ: TOKEN_TYPES.session }, claims);
    await expect401(await me(`Bearer ${token}`), 'invalid_token', 'invalid_token');
  });

  it('an unexpected typ (a dashboard token is not an access token)', async () => {
    const ctx = server.services.ctx;
    const token = await signWithServerKey(
      ctx,
      { typ: 'dashboard+jwt' },
      baseClaims(ctx, adaId, server.url.api, session.id),
    );
    await expect401(await me(`Bearer ${token}`), 'invalid_token', 'invalid_token');
  });

  it('expired', async () => {
    const ctx = server.services.ctx;
    const claims = baseClaims(ctx, adaId, server.url.api, session.id);
    const token = await signWithServerKey(
      ctx,
      { typ: TOKEN_TYPES.session },
      { ...claims, iat: claims.iat - 700, nbf: claims.nbf - 700, exp: claims.iat - 100 },
    );
    const error = await expect401(await me(`Bearer ${token}`), 'token_expired', 'invalid_token');
    expect(error['message']).toMatch(/expired/);
  });

  it('expires while cached: a token that verified before its exp is refused after it', async () => {
    const ctx = server.services.ctx;
    const claims = {
      ...baseClaims(ctx, adaId, server.url.api, session.id),
      exp: Math.floor(ctx.clock.now() / 1000) + 30,
    };
    const token = await signWithServerKey(ctx, { typ: TOKEN_TYPES.session }, claims);
    expect((await me(`Bearer ${token}`)).status).toBe(200);
    server.clock.advance(31_000);
    try {
      await expect401(await me(`Bearer ${token}`), 'token_expired', 'invalid_token');
    } finally {
      server.clock.advance(-31_000);
    }
  });

  it('not yet valid', async () => {
    const ctx = server.services.ctx;
    const claims = baseClaims(ctx, adaId, server.url.api, session.id);
    const token = await signWithServerKey(
      ctx,
      { typ: TOKEN_TYPES.session },
      { ...claims, nbf: claims.nbf + 3600 },
    );
    await expect401(await me(`Bearer ${token}`), 'invalid_token', 'invalid_token');
  });

  it('a session token for another audience', async () => {
    const ctx = server.services.ctx;
    const claims = { ...baseClaims(ctx, adaId, 'https://elsewhere.example', session.id) };
    const token = await signWithServerKey(ctx, { typ: TOKEN_TYPES.session }, claims);
    await expect401(await me(`Bearer ${token}`), 'wrong_audience', 'invalid_token');
  });

  it('an OAuth token for another resource (the user MCP server)', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: `${server.url.mcp || 'http://127.0.0.1:1'}/mcp`,
      scope: 'user:read',
    });
    await expect401(await me(`Bearer ${token}`), 'wrong_audience', 'invalid_token');
  });

  it('a revoked session, everywhere at once in this process', async () => {
    const s = await signIn(server, 'linus');
    expect((await me(`Bearer ${s.token}`)).status).toBe(200);
    const del = await fetch(`${server.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${s.token}` },
    });
    expect(del.status).toBe(204);
    await expect401(await me(`Bearer ${s.token}`), 'token_revoked', 'invalid_token');
  });

  it('a session revoked by another instance, within the liveness bound', async () => {
    const s = await signIn(server, 'grace');
    expect((await me(`Bearer ${s.token}`)).status).toBe(200);
    // Another instance revokes it straight in the shared database; this one learns of it after the cache bound.
    await server.services.ctx.db
      .updateTable('sessions')
      .set({ revoked_at: server.clock.now() })
      .where('id', '=', s.id)
      .execute();
    server.clock.advance(server.config.livenessCacheSeconds * 1000 + 1);
    await expect401(await me(`Bearer ${s.token}`), 'token_revoked', 'invalid_token');
  });
});

describe('GET /me with OAuth access tokens (RFC 9068)', () => {
  it('accepts a token for this resource with user:read', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: server.url.api,
      scope: 'user:read',
    });
    const res = await me(`Bearer ${token}`);
    expect(res.status).toBe(200);
    expect(((await openapi.check('GET', '/me', res)) as { id: string }).id).toBe(adaId);
  });

  it('refuses a token without user:read with 403 permission_error and insufficient_scope', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: server.url.api,
      scope: 'agency:mcp:read',
    });
    const res = await me(`Bearer ${token}`);
    expect(res.status).toBe(403);
    const body = (await openapi.check('GET', '/me', res)) as { error: Record<string, string> };
    expect(body.error).toMatchObject({ type: 'permission_error', code: 'insufficient_scope' });
    expect(res.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    expect(res.headers.get('www-authenticate')).toContain('scope="user:read"');
  });

  it('refuses an OAuth token whose typ is not at+jwt', async () => {
    const ctx = server.services.ctx;
    const now = Math.floor(ctx.clock.now() / 1000);
    const token = await signWithServerKey(
      ctx,
      { typ: 'JWT' },
      {
        iss: urls.issuer(ctx.config),
        sub: adaId,
        aud: server.url.api,
        iat: now,
        exp: now + 60,
        jti: 'x',
        client_id: 'c',
        scope: 'user:read',
      },
    );
    await expect401(await me(`Bearer ${token}`), 'invalid_token', 'invalid_token');
  });

  it('refuses a token whose connection has no liveness record', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: adaId,
      audience: server.url.api,
      scope: 'user:read',
      claims: { cid: 'con_doesnotexist' },
    });
    await expect401(await me(`Bearer ${token}`), 'token_revoked', 'invalid_token');
  });

  it('refuses a token whose user no longer exists', async () => {
    const token = await mintAccessToken(server.services.ctx, {
      userId: 'usr_gone',
      audience: server.url.api,
      scope: 'user:read',
    });
    await expect401(await me(`Bearer ${token}`), 'token_revoked', 'invalid_token');
  });
});
