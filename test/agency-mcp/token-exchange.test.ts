import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { removeMember } from '../../src/domain/agencies.js';
import { revokeConnection } from '../../src/domain/connections.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { AGENCY_SECRET, demo, exchange, grant } from './helpers.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
});
afterAll(() => server.close());

describe('token exchange (RFC 8693) at POST /oauth/token', () => {
  it('returns a 5-minute dashboard API token with the effective permissions now', async () => {
    const g = await grant(server, { username: 'grace' });
    const { res, body } = await exchange(server, g.token);
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toBe('no-store');
    expect(body).toMatchObject({
      issued_token_type: 'urn:ietf:params:oauth:token-type:access_token',
      token_type: 'Bearer',
      expires_in: 300,
      scope: 'agency:mcp:read agency:mcp:write',
    });
    const token = body['access_token'] as string;
    expect(decodeProtectedHeader(token).typ).toBe('dashboard+jwt');
    const claims = decodeJwt(token);
    expect(claims).toMatchObject({
      iss: server.url.auth,
      aud: `${server.url.auth}/api`,
      sub: g.userId,
      cid: g.connection.id,
      agency_id: g.agencyId,
      member_id: g.memberId,
      act: { sub: 'svc-agency-mcp' },
    });
    expect(claims.exp! - claims.iat!).toBe(300);
    // A manager: read, plus clients/projects/tasks/notes write; never members:manage or settings:manage.
    expect(String(claims['perms']).split(' ')).toEqual([
      'agency:read',
      'members:read',
      'clients:read',
      'projects:read',
      'tasks:read',
      'clients:write',
      'projects:write',
      'tasks:write',
      'notes:write',
    ]);
  });

  it('gives no write permission to a read-only token', async () => {
    const g = await grant(server, { scopes: ['agency:mcp:read'] });
    const { body } = await exchange(server, g.token);
    expect(String(decodeJwt(body['access_token'] as string)['perms'])).not.toMatch(/write|manage/);
  });

  describe('client authentication (internal client only, RFC 6749 §2.3.1)', () => {
    it.each([
      ['no credentials', { omitAuth: true }],
      ['a wrong secret', { secret: 'wrong-secret-wrong-secret-wrong-secret' }],
      ['another client id', { clientId: 'someone-else' }],
    ])('refuses %s with 401 invalid_client', async (_name, o) => {
      const g = await grant(server);
      const { res, body } = await exchange(server, g.token, o);
      expect(res.status).toBe(401);
      expect(body['error']).toBe('invalid_client');
      expect(res.headers.get('www-authenticate')).toMatch(/^Basic /);
    });
  });

  describe('refusals (RFC 8693 §2.2.2)', () => {
    it('an invalid subject token', async () => {
      const { res, body } = await exchange(server, 'not.a.token');
      expect(res.status).toBe(400);
      expect(body).toMatchObject({ error: 'invalid_request' });
      expect(String(body['error_description'])).toMatch(/subject token/);
    });

    it('a subject token for another resource', async () => {
      const g = await grant(server, { resource: `${server.url.mcp}/mcp` });
      const { body } = await exchange(server, g.token);
      expect(body['error']).toBe('invalid_request');
    });

    it('a revoked connection', async () => {
      const g = await grant(server);
      const ctx = server.services.ctx;
      await revokeConnection(ctx.db, ctx.clock, g.connection.id, 'disconnected');
      // Without forget(): the exchange reads the connection itself, not the liveness cache.
      const { body } = await exchange(server, g.token);
      expect(body).toMatchObject({ error: 'invalid_request' });
      expect(String(body['error_description'])).toMatch(/connection/);
    });

    it('an expired connection', async () => {
      const g = await grant(server);
      await server.services.ctx.db
        .updateTable('connections')
        .set({ expires_at: server.clock.now() - 1 })
        .where('id', '=', g.connection.id)
        .execute();
      const { body } = await exchange(server, g.token);
      expect(body['error']).toBe('invalid_request');
    });

    it('a removed member', async () => {
      const ctx = server.services.ctx;
      const g = await grant(server, { username: 'linus' });
      const { member: owner } = await demo(server, 'ada');
      await ctx.db.updateTable('members').set({ status: 'removed' }).where('id', '=', g.memberId).execute();
      const { body } = await exchange(server, g.token);
      expect(body).toMatchObject({ error: 'invalid_request' });
      expect(String(body['error_description'])).toMatch(/member/);
      await ctx.db.updateTable('members').set({ status: 'active' }).where('id', '=', g.memberId).execute();
      await removeMember(ctx, owner, g.memberId);
      expect((await exchange(server, g.token)).body['error']).toBe('invalid_request');
    });

    it('an audience other than the dashboard API', async () => {
      const g = await grant(server);
      const { body } = await exchange(server, g.token, {
        extra: { audience: 'https://elsewhere.example/api' },
      });
      expect(body['error']).toBe('invalid_target');
    });

    it('a subject_token_type other than access_token', async () => {
      const g = await grant(server);
      const { body } = await exchange(server, g.token, {
        extra: { subject_token_type: 'urn:ietf:params:oauth:token-type:id_token' },
      });
      expect(body['error']).toBe('invalid_request');
    });

    it('a repeated parameter', async () => {
      const g = await grant(server);
      const res = await fetch(`${server.url.auth}/oauth/token`, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          authorization: `Basic ${Buffer.from(`svc-agency-mcp:${AGENCY_SECRET}`).toString('base64')}`,
        },
        body: `grant_type=urn:ietf:params:oauth:grant-type:token-exchange&subject_token=${g.token}&subject_token=${g.token}&subject_token_type=urn:ietf:params:oauth:token-type:access_token`,
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as Record<string, string>)['error']).toBe('invalid_request');
    });
  });

  it('leaves the public grants refusing client credentials', async () => {
    const res = await fetch(`${server.url.auth}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from(`svc-agency-mcp:${AGENCY_SECRET}`).toString('base64')}`,
      },
      body: 'grant_type=refresh_token&refresh_token=x&client_id=svc-agency-mcp',
    });
    expect(res.status).toBe(401);
  });
});
