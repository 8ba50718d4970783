import { decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { KEY_REFRESH_INTERVAL_MS } from '../../src/tokens/signing-keys.js';
import { Browser, connect, token } from '../auth/oauth-helpers.js';
import { serverForCli, svc } from '../helpers/cli.js';
import { ENGINE, signIn } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';

/**
 * A signing key that may have leaked (a database backup holds the private keys), at night: `svc keys rotate` keeps the
 * old key accepted until the longest-lived token it signed expires (a session's 30 days), so anyone holding it could
 * still sign tokens the service takes for that long. `svc keys withdraw`, a process apart from the instance serving,
 * makes the instance refuse everything the old keys signed within the key-pickup bound, cached tokens included; a
 * member signs in again and an app refreshes, with tokens the new key signs at once.
 */

const serving = serverForCli();

const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid;
const published = async () =>
  (
    (await (await fetch(`${serving.server.url.auth}/.well-known/jwks.json`)).json()) as {
      keys: { kid: string }[];
    }
  ).keys.map((k) => k.kid);
const me = (bearer: string) =>
  fetch(`${serving.server.url.api}/me`, { headers: { authorization: `Bearer ${bearer}` } }).then(
    (r) => r.status,
  );
const agencyCall = (bearer: string) =>
  modernRequest(
    `${serving.server.url.agencyMcp}/mcp`,
    'tools/call',
    { name: 'get_agency', arguments: {} },
    { token: bearer },
  ).then((r) => r.status);

/** Whether `status` gives 401 within `ms` of real time, tried every 100 ms. */
async function refusedWithin(ms: number, status: () => Promise<number>): Promise<boolean> {
  for (const until = performance.now() + ms; performance.now() < until;) {
    if ((await status()) === 401) return true;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return false;
}

describe(`svc keys withdraw, with an instance serving (${ENGINE})`, () => {
  it('every token the old keys signed is refused within the key-pickup bound; signing in and refreshing work at once', async () => {
    // A rotation first: a retired key still accepted is withdrawn too.
    expect((await svc('keys', 'rotate')).code).toBe(0);
    serving.server.clock.advance(KEY_REFRESH_INTERVAL_MS + 1);
    const accepted = await published();
    expect(accepted).toHaveLength(2);

    const api = await signIn(serving.server, 'ada');
    const browser = new Browser(serving.server.url.auth);
    await browser.signIn('ada');
    const { clientId, tokens } = await connect(serving.server, { browser });
    // Each verified, so each in this instance's verified-token cache.
    expect(await me(api.token)).toBe(200);
    expect((await browser.get('/dashboard')).status).toBe(200);
    expect(await agencyCall(tokens['access_token']!)).toBe(200);

    const r = await svc('keys', 'withdraw');
    expect(r.code).toBe(0);
    const kid = /^signing with new key (\w+);/.exec(r.out)?.[1];
    expect(kid).toBeDefined();
    expect(r.out).toContain(`withdrawn: ${accepted.join(', ')}.`);
    expect(r.out).toContain(`within ${KEY_REFRESH_INTERVAL_MS / 1000} s`);

    // Nothing here signs or verifies a new token, nor reads the key set: the instance learns of the withdrawal by
    // itself, within the key-pickup bound of real time, and forgets the cached ones.
    expect(await refusedWithin(KEY_REFRESH_INTERVAL_MS + 2_000, () => me(api.token))).toBe(true);
    expect(await published()).toEqual([kid]);
    // The instance says so, naming the keys, for the operator checking that the withdrawal reached it.
    expect(serving.server.logs.lines).toContainEqual(
      expect.objectContaining({
        kids: accepted,
        msg: 'signing keys no longer accepted: every token they signed is refused here',
      }),
    );
    expect((await browser.get('/dashboard')).status).toBe(303);
    expect(await agencyCall(tokens['access_token']!)).toBe(401);

    // The app refreshes (its refresh token is not signed) and its new access token, signed by the new key, works.
    const refreshed = await token(serving.server, {
      grant_type: 'refresh_token',
      refresh_token: tokens['refresh_token']!,
      client_id: clientId,
    });
    expect(refreshed.res.status).toBe(200);
    expect(kidOf(refreshed.body['access_token']!)).toBe(kid);
    expect(await agencyCall(refreshed.body['access_token']!)).toBe(200);
    // The member signs in again: the new key signs at once, not after the activation delay of a rotation.
    const again = await signIn(serving.server, 'ada');
    expect(kidOf(again.token)).toBe(kid);
    expect(await me(again.token)).toBe(200);
    await browser.signIn('ada');
    expect((await browser.get('/dashboard')).status).toBe(200);
  });
});
