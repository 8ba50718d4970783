import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { agencyToolCallWorks, Browser, connect, connectionStatus, register } from './oauth-helpers.js';

/** Token revocation (RFC 7009) of refresh and access tokens, as clients send it. */

const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;
let clientId: string;
let ada: Browser;

beforeAll(async () => {
  server = await startTestServer({ env: { DCR_LIMIT_PER_IP: '1000' } });
  clientId = (await register(server, { redirect_uris: [REDIRECT], client_name: 'Revoker' })).body[
    'client_id'
  ] as string;
  ada = new Browser(server.url.auth);
});
afterAll(() => server?.close());

const revoke = (params: Record<string, string>) =>
  fetch(`${server.url.auth}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });
const fresh = () => connect(server, { clientId, redirectUri: REDIRECT, browser: ada });

describe(`revocation (${ENGINE})`, () => {
  for (const hint of [undefined, 'access_token', 'refresh_token']) {
    it(`an access token (token_type_hint ${hint ?? 'absent'}) stops working, and its connection ends`, async () => {
      const { tokens } = await fresh();
      expect(await agencyToolCallWorks(server, tokens['access_token']!)).toBe(true);
      const res = await revoke({
        token: tokens['access_token']!,
        client_id: clientId,
        ...(hint ? { token_type_hint: hint } : {}),
      });
      expect(res.status).toBe(200);
      expect(await agencyToolCallWorks(server, tokens['access_token']!)).toBe(false);
      const row = await connectionStatus(server, tokens['access_token']!);
      expect([row.status, row.revoke_reason]).toEqual(['revoked', 'revoked_by_client']);
    });
  }

  it('a refresh token: its access tokens stop working too (RFC 7009 §2.1)', async () => {
    const { tokens } = await fresh();
    expect((await revoke({ token: tokens['refresh_token']!, client_id: clientId })).status).toBe(200);
    expect(await agencyToolCallWorks(server, tokens['access_token']!)).toBe(false);
  });

  it('without client_id → 400 invalid_request, and nothing is revoked', async () => {
    const { tokens } = await fresh();
    for (const token of [tokens['refresh_token']!, tokens['access_token']!]) {
      const res = await revoke({ token });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: string }).error).toBe('invalid_request');
    }
    expect((await connectionStatus(server, tokens['access_token']!)).status).toBe('active');
  });

  it("another client's access token is not revoked (and the answer is still 200)", async () => {
    const { tokens } = await fresh();
    expect((await revoke({ token: tokens['access_token']!, client_id: 'claude-code' })).status).toBe(200);
    expect(await agencyToolCallWorks(server, tokens['access_token']!)).toBe(true);
  });

  it('a token that is not ours (a forged JWT, garbage) → 200, nothing happens', async () => {
    expect((await revoke({ token: 'eyJhbGciOiJub25lIn0.e30.', client_id: clientId })).status).toBe(200);
  });
});
