import { existsSync } from 'node:fs';
import type { Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agencyIds, authorizeQuery, Browser, pkce, register } from '../auth/oauth-helpers.js';
import { CHROMIUM, launchChromium } from '../helpers/browser.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { agentWriteEnabled } from '../helpers/rows.js';

/**
 * Two credentials, never interchangeable: the API session token (POST /api/sessions, for agents and scripts at the
 * REST API and the user MCP server) and the browser session (the cookie only the sign-in page issues). A program
 * holding an API session token must not reach the member's pages, consent or the dashboard API's web use.
 */

const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;
let chromium: PwBrowser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} not found: apt-get install -y chromium`);
  server = await startTestServer({ env: { DCR_LIMIT_PER_IP: '1000' } });
  chromium = await launchChromium();
}, 60_000);
afterAll(async () => {
  await chromium?.close();
  await server?.close();
});

/** A cookie-keeping client that holds the given session token as its `svc_session` cookie. */
function withSessionCookie(token: string): Browser {
  const b = new Browser(server.url.auth);
  b.cookies.set('svc_session', token);
  return b;
}

describe(`an API session token used as the browser session cookie (${ENGINE})`, () => {
  it('is refused by the dashboard, the owner settings, consent and the dashboard API', async () => {
    const { token } = await signIn(server, 'ada');
    const program = withSessionCookie(token);
    // The dashboard: sent to sign in, as without a session.
    const dashboard = await program.get('/dashboard');
    expect(dashboard.status).toBe(303);
    expect(dashboard.headers.get('location')).toMatch(/^\/sign-in/);
    // Owner settings: a form post with a valid CSRF token still finds no signed-in member.
    await program.get('/sign-in');
    const northwind = (await agencyIds(server))['Northwind Studio']!;
    // (Northwind allows agent write; the form without the box would turn it off.)
    const settings = await program.post(`/dashboard/agencies/${northwind}/settings`, { csrf: program.csrf });
    expect(settings.headers.get('location') ?? '').not.toMatch(/^\/dashboard/);
    expect(await agentWriteEnabled(server.services.ctx.db, northwind)).toBe(1);
    // Consent: the authorization request sends it to sign in, never to the consent page.
    const clientId = (await register(server, { redirect_uris: [REDIRECT] })).body['client_id'] as string;
    const q = authorizeQuery(
      server,
      { clientId, redirectUri: REDIRECT, scope: 'agency:mcp:write' },
      pkce().challenge,
    );
    const authorize = await program.get(`/oauth2/auth?${q}`);
    expect(authorize.status).toBe(302);
    expect(authorize.headers.get('location')).toMatch(/^\/sign-in/);
    // The dashboard API's web use (GET with the cookie, no bearer).
    const api = await program.get(`/api/agencies/${northwind}/clients`);
    expect(api.status).toBe(401);
  });

  it('in a real browser: the cookie opens nothing', async () => {
    const { token } = await signIn(server, 'ada');
    const context = await chromium.newContext({ javaScriptEnabled: false });
    await context.addCookies([{ name: 'svc_session', value: token, url: server.url.auth }]);
    const page = await context.newPage();
    await page.goto(`${server.url.auth}/dashboard`);
    await expect(page.getByRole('heading', { name: 'Sign in' }).isVisible()).resolves.toBe(true);
    await context.close();
  });

  it('and the browser session cookie is refused as a bearer token at /me and the session API', async () => {
    const member = new Browser(server.url.auth);
    await member.signIn('ada');
    const cookie = member.cookies.get('svc_session')!;
    expect(cookie).toBeTruthy();
    const me = await fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${cookie}` } });
    expect(me.status).toBe(401);
    const end = await fetch(`${server.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${cookie}` },
    });
    expect(end.status).toBe(401);
  });

  it('the browser session ends on sign-out: the same cookie no longer opens the dashboard', async () => {
    const member = new Browser(server.url.auth);
    await member.signIn('ada');
    const cookie = member.cookies.get('svc_session')!;
    expect((await member.get('/dashboard')).status).toBe(200);
    expect((await member.post('/sign-out', { csrf: member.csrf })).status).toBe(303);
    const replay = withSessionCookie(cookie);
    expect((await replay.get('/dashboard')).status).toBe(303);
  });

  it('the API session token still works where it belongs: /me, and ending itself', async () => {
    const { token } = await signIn(server, 'ada');
    const auth = { authorization: `Bearer ${token}` };
    expect((await fetch(`${server.url.api}/me`, { headers: auth })).status).toBe(200);
    const end = await fetch(`${server.url.auth}/api/sessions/current`, { method: 'DELETE', headers: auth });
    expect(end.status).toBe(204);
  });
});

describe(`open redirect through the sign-in page's next (${ENGINE})`, () => {
  for (const next of ['%2F%09%2Fevil.example%2Fx', '%2F%09%5C%5Cevil.example', '%2F%5Cevil.example']) {
    it(`a signed-in browser sent to /sign-in?next=${next} stays on the authorization server`, async () => {
      const context = await chromium.newContext({ javaScriptEnabled: false });
      const page = await context.newPage();
      page.setDefaultTimeout(8000);
      await page.goto(`${server.url.auth}/sign-in`);
      await page.getByLabel('Username').fill('ada');
      await page.getByLabel('Password').fill('ada-demo-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(/\/dashboard/);
      await page.goto(`${server.url.auth}/sign-in?next=${next}`).catch(() => undefined);
      expect(new URL(page.url()).origin).toBe(new URL(server.url.auth).origin);
      await context.close();
    });
  }
});

describe(`another site's malformed cookie on the same host (${ENGINE})`, () => {
  it('in a real browser, _ga=GA1.1.100% does not break sign-in or the dashboard', async () => {
    const context = await chromium.newContext({ javaScriptEnabled: false });
    await context.addCookies([{ name: '_ga', value: 'GA1.1.100%', url: server.url.auth }]);
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    const first = await page.goto(`${server.url.auth}/sign-in`);
    expect(first?.status()).toBe(200);
    await page.getByLabel('Username').fill('ada');
    await page.getByLabel('Password').fill('ada-demo-password');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(/\/dashboard/);
    await expect(page.getByRole('heading', { name: 'Connected apps', level: 1 }).isVisible()).resolves.toBe(
      true,
    );
    await context.close();
  });
});
