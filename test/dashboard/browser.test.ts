import { existsSync } from 'node:fs';
import type { Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { connectionStatus, pkce, register, token } from '../auth/oauth-helpers.js';
import { CHROMIUM, type CallbackServer, launchChromium, startCallbackServer } from '../helpers/browser.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * The whole flow in a real browser (Debian's chromium through playwright-core), with JavaScript disabled to prove
 * the pages need none: sign in, pick the agency, choose a ceiling, Allow, the code comes back to the client's
 * loopback callback, is exchanged, and the refresh token rotates; then Disconnect in the dashboard.
 */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
let server: TestServer;
let browser: PwBrowser;
let callback: CallbackServer;
let callbackUrl: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} not found: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  server = await startTestServer({ env: { AGENCY_MCP_URL } });
  callback = await startCallbackServer();
  callbackUrl = callback.url;
  browser = await launchChromium();
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await callback?.close();
  await server?.close();
});

describe(`browser flow (${ENGINE})`, () => {
  it('sign in, pick agency, choose a ceiling, Allow, exchange the code, rotate the refresh token, disconnect', async () => {
    const clientId = (
      await register(server, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Browser Agent' })
    ).body['client_id'] as string;
    const { verifier, challenge } = pkce();
    const q = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: callbackUrl,
      code_challenge: challenge,
      code_challenge_method: 'S256',
      resource: `${AGENCY_MCP_URL}/mcp`,
      scope: 'agency:mcp:read agency:mcp:write offline_access',
      state: 'browser-state',
    });
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    await page.goto(`${server.url.auth}/oauth2/auth?${q}`);

    // Sign in.
    await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await page.getByLabel('Username').fill('ada');
    await page.getByLabel('Password').fill('ada-demo-password');
    await page.getByRole('button', { name: 'Sign in' }).click();

    // Pick the agency.
    await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
    await page.getByLabel(/Northwind Studio/).check();
    await page.getByRole('button', { name: 'Continue' }).click();

    // Consent: the scopes in words, the ceiling as checkboxes; untick two permissions.
    await page.getByRole('heading', { name: 'Connect Browser Agent' }).waitFor();
    const text = await page.locator('main').textContent();
    expect(text).toContain('Northwind Studio');
    expect(text).toMatch(/receives the answer on your own computer/);
    expect(text).toContain('Make changes in the agency on your behalf');
    await page.getByLabel(/See the members of the agency/).uncheck();
    await page.getByLabel(/Create and change clients/).uncheck();
    await page.getByRole('button', { name: 'Allow' }).click();

    await page.waitForURL(/\/callback\?/);
    const back = callback.received.at(-1)!;
    expect(back.searchParams.get('state')).toBe('browser-state');
    expect(back.searchParams.get('iss')).toBe(server.url.auth);
    const code = back.searchParams.get('code')!;

    const exchanged = await token(server, {
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: callbackUrl,
      client_id: clientId,
    });
    expect(exchanged.res.status).toBe(200);
    const connection = await connectionStatus(server, exchanged.body['access_token']!);
    expect(connection.ceiling.split(' ')).not.toContain('members:read');
    expect(connection.ceiling.split(' ')).not.toContain('clients:write');
    expect(connection.ceiling.split(' ')).toContain('tasks:write');

    const rotated = await token(server, {
      grant_type: 'refresh_token',
      refresh_token: exchanged.body['refresh_token']!,
      client_id: clientId,
    });
    expect(rotated.res.status).toBe(200);
    expect(rotated.body['refresh_token']).not.toBe(exchanged.body['refresh_token']);

    // The dashboard shows the app under its agency, in words; Disconnect ends it.
    await page.goto(`${server.url.auth}/dashboard`);
    await page.getByRole('heading', { name: 'Connected apps', level: 1 }).waitFor();
    const entry = page
      .getByRole('region', { name: 'Northwind Studio' })
      .locator('li.app', { hasText: 'Browser Agent' });
    expect(await entry.textContent()).toMatch(/It may: see the agency name and plan, see clients/);
    expect(await entry.textContent()).not.toMatch(/see the members of the agency/);
    await page.getByRole('button', { name: 'Disconnect Browser Agent' }).click();
    await page.getByRole('heading', { name: 'Disconnect Browser Agent?' }).waitFor();
    expect(await page.locator('main').textContent()).toContain(
      'Browser Agent will lose access to Northwind Studio at once.',
    );
    await page.getByRole('button', { name: 'Disconnect Browser Agent' }).click();
    await page.getByText('The application was disconnected.').waitFor();
    expect((await connectionStatus(server, rotated.body['access_token']!)).status).toBe('revoked');
    await context.close();
  });

  it('a step-up (read, then read and write after a 403) leaves one entry in Connected apps, with write', async () => {
    const clientId = (
      await register(server, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Step-up Agent' })
    ).body['client_id'] as string;
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);

    /** One authorization through the pages, as the host opens it in the member's browser; returns the tokens. */
    async function authorizeInBrowser(scope: string, heading: string) {
      const { verifier, challenge } = pkce();
      const q = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: callbackUrl,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        resource: `${AGENCY_MCP_URL}/mcp`,
        scope,
        state: 'step-up',
      });
      await page.goto(`${server.url.auth}/oauth2/auth?${q}`);
      if (await page.getByRole('heading', { name: 'Sign in' }).isVisible()) {
        await page.getByLabel('Username').fill('ada');
        await page.getByLabel('Password').fill('ada-demo-password');
        await page.getByRole('button', { name: 'Sign in' }).click();
      }
      await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
      await page.getByLabel(/Northwind Studio/).check();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByRole('heading', { name: heading }).waitFor();
      consentTexts.push((await page.locator('main').textContent()) ?? '');
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.waitForURL(/\/callback\?/);
      const code = callback.received.at(-1)!.searchParams.get('code')!;
      const exchanged = await token(server, {
        grant_type: 'authorization_code',
        code,
        code_verifier: verifier,
        redirect_uri: callbackUrl,
        client_id: clientId,
      });
      expect(exchanged.res.status).toBe(200);
      return exchanged.body;
    }

    const consentTexts: string[] = [];
    const read = await authorizeInBrowser('agency:mcp:read offline_access', 'Connect Step-up Agent');
    expect(read['scope']).toBe('agency:mcp:read offline_access');
    // The step-up does not look like a first connection: it says what the app has and what this adds.
    const write = await authorizeInBrowser(
      'agency:mcp:read agency:mcp:write offline_access',
      'Update access for Step-up Agent',
    );
    expect(write['scope']).toContain('agency:mcp:write');
    expect(consentTexts[1]).toMatch(/already connected to Northwind Studio with read access/);
    expect(consentTexts[1]).toMatch(
      /Allowing this adds: create and change clients, create and change projects, create and change tasks, add notes\./,
    );
    const [before, after] = await Promise.all([
      connectionStatus(server, read['access_token']!),
      connectionStatus(server, write['access_token']!),
    ]);
    expect(after.id).toBe(before.id);

    await page.goto(`${server.url.auth}/dashboard`);
    await page.getByRole('heading', { name: 'Connected apps', level: 1 }).waitFor();
    expect(await page.getByRole('button', { name: 'Disconnect Step-up Agent' }).count()).toBe(1);
    const entry = page.locator('li.app', { hasText: 'Step-up Agent' });
    expect(await entry.count()).toBe(1);
    expect(await entry.textContent()).toMatch(/It may: [^.]*create and change tasks/);
    expect(await entry.textContent()).toContain('agency:mcp:write');
    await context.close();
  });
});
