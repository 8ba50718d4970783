import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Locator, Browser as PwBrowser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pkce, register, token } from '../auth/oauth-helpers.js';
import { type CallbackServer, launchChromium, startCallbackServer } from '../helpers/browser.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * The member pages as a member meets them, in Debian's chromium at a phone's width (390 px) and a laptop's (1280 px):
 * every page passes axe-core with no serious or critical violation, nothing is wider than the screen, and each page is
 * saved as a screenshot (to SCREENSHOTS_DIR, default a temporary folder; `npm run screenshots` refreshes docs/screens).
 * Then the consent defaults, and the whole flow with the keyboard only and JavaScript off.
 */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
const RESOURCE = `${AGENCY_MCP_URL}/mcp`;
const READ_PERMISSIONS = ['agency:read', 'members:read', 'clients:read', 'projects:read', 'tasks:read'];
const WRITE_PERMISSIONS = ['clients:write', 'projects:write', 'tasks:write', 'notes:write'];
const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SCREENS = process.env['SCREENSHOTS_DIR'] ?? join(tmpdir(), 'svc-screens');
const WIDTHS = [
  { name: 'phone', width: 390, height: 844 },
  // WCAG 2.2 §1.4.10 (Reflow): content at 320 CSS px without scrolling sideways.
  { name: 'small-phone', width: 320, height: 640 },
  { name: 'desktop', width: 1280, height: 800 },
] as const;

let server: TestServer;
let browser: PwBrowser;
let callback: CallbackServer;
let clientId: string;

beforeAll(async () => {
  mkdirSync(SCREENS, { recursive: true });
  server = await startTestServer({ env: { AGENCY_MCP_URL } });
  callback = await startCallbackServer();
  browser = await launchChromium();
  clientId = (
    await register(server, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Planner Bot' })
  ).body['client_id'] as string;
}, 60_000);
afterAll(async () => {
  await browser?.close();
  await callback?.close();
  await server?.close();
});

function authorizeUrl(scope: string, challenge = pkce().challenge, client = clientId): string {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: client,
    redirect_uri: callback.url,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    resource: RESOURCE,
    scope,
    state: 'pages',
  });
  return `${server.url.auth}/oauth2/auth?${q}`;
}

/** Exchanges the code the callback received last, as the client would: the connection is then active. */
async function exchangeLatestCode(verifier: string, client = clientId) {
  const exchanged = await token(server, {
    grant_type: 'authorization_code',
    code: callback.received.at(-1)!.searchParams.get('code')!,
    code_verifier: verifier,
    redirect_uri: callback.url,
    client_id: client,
  });
  expect(exchanged.res.status).toBe(200);
}

/** Signs `username` in on the sign-in page, with their demo password. */
async function signInAs(page: Page, username: string) {
  await page.getByLabel('Username').fill(username);
  await page.getByLabel('Password').fill(`${username}-demo-password`);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

/** Northwind Studio on the agency choice, when one is shown (to a member of several agencies). */
async function chooseNorthwindIfAsked(page: Page) {
  if (!(await page.getByRole('heading', { name: 'Choose an agency' }).isVisible())) return;
  await page.getByLabel(/Northwind Studio/).check();
  await page.getByRole('button', { name: 'Continue' }).click();
}

/** A self-registered app with this name and a loopback redirect: its client id. */
async function registerNamed(name: string): Promise<string> {
  const registered = await register(server, {
    redirect_uris: ['http://127.0.0.1/callback'],
    client_name: name,
  });
  return registered.body['client_id'] as string;
}

/** The ceiling boxes of the consent page: [value, ticked]. */
const ceilingBoxes = (page: Page) =>
  page
    .locator('input[name="ceiling"]')
    .evaluateAll((boxes) => boxes.map((b: any) => [b.value as string, b.checked as boolean]));

interface PageReport {
  page: string;
  violations: { id: string; impact: string; nodes: number }[];
  scrollWidth: number;
  innerWidth: number;
}

/** axe-core's serious and critical findings, the page's width against the viewport's, and a screenshot. */
async function inspect(page: Page, name: string, width: string): Promise<PageReport> {
  await page.addScriptTag({ content: AXE_SOURCE });
  const violations = await page.evaluate(async () => {
    const axe = (globalThis as any).axe as { run(o: object): Promise<{ violations: any[] }> };
    const result = await axe.run({ resultTypes: ['violations'] });
    return result.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => ({ id: v.id as string, impact: v.impact as string, nodes: v.nodes.length as number }));
  });
  const { scrollWidth, innerWidth } = await page.evaluate(() => {
    const w = globalThis as any;
    return {
      scrollWidth: w.document.documentElement.scrollWidth as number,
      innerWidth: w.innerWidth as number,
    };
  });
  await page.screenshot({ path: join(SCREENS, `${name}-${width}.png`), fullPage: true });
  return { page: name, violations, scrollWidth, innerWidth };
}

describe(`member pages at 320, 390 and 1280 px (${ENGINE})`, () => {
  for (const viewport of WIDTHS) {
    it(`${viewport.name} (${viewport.width} px): no serious or critical axe-core violation, nothing wider than the screen`, async () => {
      // Scripts on, and the pages' CSP bypassed, only so axe-core can be injected: the pages themselves have none.
      const context = await browser.newContext({
        viewport: { width: viewport.width, height: viewport.height },
        bypassCSP: true,
      });
      const page = await context.newPage();
      page.setDefaultTimeout(8000);
      const reports: PageReport[] = [];
      const look = async (name: string) => reports.push(await inspect(page, name, viewport.name));

      const { verifier, challenge } = pkce();
      await page.goto(authorizeUrl('agency:mcp:read offline_access', challenge));
      await look('sign-in');
      await signInAs(page, 'ada');
      await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
      await look('agency-pick');
      await page.getByLabel(/Northwind Studio/).check();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByRole('heading', { name: 'Connect Planner Bot' }).waitFor();
      await look('consent');
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.waitForURL(/\/callback\?/);
      await exchangeLatestCode(verifier);

      await page.goto(authorizeUrl('agency:mcp:read agency:mcp:write offline_access'));
      await page.getByLabel(/Northwind Studio/).check();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByRole('heading', { name: 'Update access for Planner Bot' }).waitFor();
      await look('consent-update');

      await page.goto(`${server.url.auth}/dashboard`);
      await page.getByRole('heading', { name: 'Connected apps', level: 1 }).waitFor();
      await page.locator('li.app', { hasText: 'Planner Bot' }).getByText('Technical details').click();
      await look('connected-apps');
      // Each scope and permission on one line (beside its term, `agency:mcp:read` broke mid-word at 390 px).
      const split = await page
        .locator('li.app', { hasText: 'Planner Bot' })
        .locator('dl')
        .evaluate((dl: any) =>
          [...dl.querySelectorAll('dt')]
            .filter((dt: any) => ['Scopes', 'Permissions allowed'].includes(dt.textContent))
            .flatMap((dt: any) => [...dt.nextElementSibling.querySelectorAll('code')])
            .filter((code: any) => code.getClientRects().length > 1)
            .map((code: any) => code.textContent as string),
        );
      expect(split).toEqual([]);
      const northwind = page.getByRole('region', { name: 'Northwind Studio' });
      for (const [tab, heading] of [
        ['Members', 'Members of Northwind Studio'],
        ['Settings', 'Settings of Northwind Studio'],
        ['History', 'History of Northwind Studio'],
      ] as const) {
        await page.goto(`${server.url.auth}/dashboard`);
        await northwind.getByRole('link', { name: tab }).click();
        await page.getByRole('heading', { name: heading }).waitFor();
        await look(tab.toLowerCase());
      }
      // Removing a member asks first; kept here, as the other tests need grace.
      await page.goto(`${server.url.auth}/dashboard`);
      await northwind.getByRole('link', { name: 'Members' }).click();
      await page.getByRole('button', { name: 'Remove grace' }).click();
      await page.getByRole('heading', { name: 'Remove grace from Northwind Studio?' }).waitFor();
      await look('remove-member');
      await page.getByRole('link', { name: 'Keep grace' }).click();
      await page.getByRole('heading', { name: 'Members of Northwind Studio' }).waitFor();
      // Every action is reachable on the phone: Disconnect is on screen once scrolled to, not beyond the edge.
      await page.goto(`${server.url.auth}/dashboard`);
      const disconnect = page.getByRole('button', { name: 'Disconnect Planner Bot' });
      await disconnect.scrollIntoViewIfNeeded();
      const box = (await disconnect.boundingBox())!;
      expect(box.x + box.width).toBeLessThanOrEqual(viewport.width);
      await disconnect.click();
      // It asks first, naming the app and what it loses.
      await page.getByRole('heading', { name: 'Disconnect Planner Bot?' }).waitFor();
      await look('disconnect');
      await page.getByRole('button', { name: 'Disconnect Planner Bot' }).click();
      await page.getByText('The application was disconnected.').waitFor();
      await context.close();

      expect(reports.map((r) => r.page)).toEqual([
        'sign-in',
        'agency-pick',
        'consent',
        'consent-update',
        'connected-apps',
        'members',
        'settings',
        'history',
        'remove-member',
        'disconnect',
      ]);
      for (const r of reports) {
        expect({ page: r.page, violations: r.violations }).toEqual({ page: r.page, violations: [] });
        expect({ page: r.page, scrollWidth: r.scrollWidth }).toEqual({
          page: r.page,
          scrollWidth: r.innerWidth,
        });
      }
    });
  }
});

describe(`consent defaults (${ENGINE})`, () => {
  /** Opens consent for `username` in Northwind with `scope`; returns the page. */
  async function consentFor(username: string, scope: string) {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    await page.goto(authorizeUrl(scope));
    await signInAs(page, username);
    await chooseNorthwindIfAsked(page);
    await page.locator('h1', { hasText: /Planner Bot/ }).waitFor();
    return { page, close: () => context.close() };
  }

  it('read access: the read permissions the tools use, ticked; nothing else offered', async () => {
    const { page, close } = await consentFor('grace', 'agency:mcp:read');
    expect(await ceilingBoxes(page)).toEqual(READ_PERMISSIONS.map((p) => [p, true]));
    const text = (await page.locator('main').textContent())!;
    expect(text).toContain('You can disconnect Planner Bot at any time: Dashboard → Connected apps.');
    expect(text).toContain('Not verified');
    await close();
  });

  it('write access asked and allowed: the write permissions the tools use too; never members:manage or settings:manage', async () => {
    const { page, close } = await consentFor('ada', 'agency:mcp:read agency:mcp:write');
    expect(await ceilingBoxes(page)).toEqual(
      [...READ_PERMISSIONS, ...WRITE_PERMISSIONS].map((p) => [p, true]),
    );
    expect(await page.locator('main').innerHTML()).not.toMatch(
      /members:manage|settings:manage|Manage members/,
    );
    await close();
  });

  it('write access asked by a viewer: refused in words, the reads offered', async () => {
    const { page, close } = await consentFor('linus', 'agency:mcp:read agency:mcp:write');
    expect(await ceilingBoxes(page)).toEqual(READ_PERMISSIONS.map((p) => [p, true]));
    expect(await page.locator('main').textContent()).toMatch(/your role \(viewer\) cannot make changes/);
    await close();
  });
});

describe(`keyboard only, JavaScript off (${ENGINE})`, () => {
  /** Presses Tab until `selector` has the focus (at most 40 times); fails if it never does. */
  async function tabTo(page: Page, selector: string) {
    for (let i = 0; i < 40; i++) {
      await page.keyboard.press('Tab');
      if ((await page.locator(`${selector}:focus`).count()) === 1) return;
    }
    throw new Error(`${selector} never took the focus`);
  }

  it('sign in, pick the agency, Allow, then Disconnect: all with Tab, arrows, Space and Enter', async () => {
    const context = await browser.newContext({
      javaScriptEnabled: false,
      viewport: { width: 390, height: 844 },
    });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    const before = callback.received.length;
    const { verifier, challenge } = pkce();
    await page.goto(authorizeUrl('agency:mcp:read offline_access', challenge));
    await tabTo(page, '#username');
    await page.keyboard.type('ada');
    await tabTo(page, '#password');
    await page.keyboard.type('ada-demo-password');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
    await tabTo(page, 'input[type="radio"]');
    await page.keyboard.press('ArrowDown'); // Blue Harbor → Northwind Studio
    await tabTo(page, 'button[type="submit"].primary');
    await page.keyboard.press('Enter');
    await page.locator('h1', { hasText: /Planner Bot/ }).waitFor();
    expect(await page.locator('main').textContent()).toContain('Northwind Studio');
    await tabTo(page, 'button[value="allow"]');
    await page.keyboard.press('Enter');
    await page.waitForURL(/\/callback\?/);
    expect(callback.received.length).toBe(before + 1);
    await exchangeLatestCode(verifier);

    await page.goto(`${server.url.auth}/dashboard`);
    await tabTo(page, 'button[aria-label="Disconnect Planner Bot"]');
    await page.keyboard.press('Enter');
    await page.getByRole('heading', { name: 'Disconnect Planner Bot?' }).waitFor();
    await tabTo(page, 'button[type="submit"].primary');
    await page.keyboard.press('Enter');
    await page.getByText('The application was disconnected.').waitFor();
    await context.close();
  });
});

describe(`an application's name of 200 characters without a space, at a phone's width (${ENGINE})`, () => {
  it('consent, Connected apps and History stay within the screen', async () => {
    // client_name allows 200 characters: as one word, it made Connected apps 2,483 px wide and History 2,192 at 390 px
    // (a flex row's least width is its longest word unless the word may break anywhere): the page scrolled sideways.
    const name = `Planner${'X'.repeat(193)}`;
    const longNamed = await registerNamed(name);
    const context = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    const widths: Record<string, number> = {};
    const measure = async (at: string) => {
      widths[at] = await page.evaluate(
        () => (globalThis as any).document.documentElement.scrollWidth as number,
      );
    };
    const { verifier, challenge } = pkce();
    await page.goto(authorizeUrl('agency:mcp:read offline_access', challenge, longNamed));
    await signInAs(page, 'grace');
    await chooseNorthwindIfAsked(page);
    await page.getByRole('button', { name: 'Allow' }).waitFor();
    await measure('consent');
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL(/\/callback\?/);
    await exchangeLatestCode(verifier, longNamed);
    await page.goto(`${server.url.auth}/dashboard`);
    await measure('connected-apps');
    const disconnect = page.getByRole('button', { name: `Disconnect ${name}` });
    await disconnect.scrollIntoViewIfNeeded();
    const box = (await disconnect.boundingBox())!;
    expect(box.x + box.width).toBeLessThanOrEqual(390);
    await disconnect.click();
    await page.locator('h1', { hasText: /^Disconnect / }).waitFor();
    await measure('disconnect');
    await page.getByRole('link', { name: /^Keep / }).click();
    await page
      .getByRole('region', { name: 'Northwind Studio' })
      .getByRole('link', { name: 'History' })
      .click();
    await page.getByRole('heading', { name: 'History of Northwind Studio' }).waitFor();
    await measure('history');
    await context.close();
    expect(widths).toEqual({ consent: 390, 'connected-apps': 390, disconnect: 390, history: 390 });
  });
});

describe(`an application's name in a right-to-left script (${ENGINE})`, () => {
  it('keeps its own direction inside the sentences of consent and History', async () => {
    // A Hebrew name ending in "!": read right to left, the "!" ends it, on its left. Set in an English sentence
    // without isolation, the "!" took the sentence's direction and was drawn on the right, and a bracket or number
    // beside a name could be drawn into it.
    const name = 'מתכנן!';
    const client = await registerNamed(name);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const page = await context.newPage();
    page.setDefaultTimeout(8000);
    /** Whether the name's last character ("!") is drawn left of its first, as in right-to-left text. */
    const drawnRightToLeft = (where: Locator) =>
      where.evaluate((el: any, n: string) => {
        const doc = el.ownerDocument;
        const walker = doc.createTreeWalker(el, 4 /* text nodes */);
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
          const at = (node.data as string).indexOf(n);
          if (at < 0) continue;
          const x = (i: number) => {
            const range = doc.createRange();
            range.setStart(node, i);
            range.setEnd(node, i + 1);
            return range.getBoundingClientRect().x as number;
          };
          return x(at + n.length - 1) < x(at);
        }
        return undefined;
      }, name);

    const { verifier, challenge } = pkce();
    await page.goto(authorizeUrl('agency:mcp:read offline_access', challenge, client));
    // ada, a member of two agencies: the agency choice names the app too.
    await signInAs(page, 'ada');
    await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
    expect(await drawnRightToLeft(page.locator('p', { hasText: 'wants to connect' }))).toBe(true);
    await chooseNorthwindIfAsked(page);
    await page.getByRole('button', { name: 'Allow' }).waitFor();
    const consent = {
      heading: await drawnRightToLeft(page.getByRole('heading', { level: 1 })),
      whoAsks: await drawnRightToLeft(page.locator('p', { hasText: 'wants to act for you' })),
      mayDo: await drawnRightToLeft(page.getByRole('heading', { name: /may do/ })),
      disconnectLater: await drawnRightToLeft(page.locator('p', { hasText: 'You can disconnect' })),
    };
    expect(consent).toEqual({ heading: true, whoAsks: true, mayDo: true, disconnectLater: true });
    // The tab's title holds no markup: the name as it was written.
    expect(await page.title()).toBe(`Connect ${name}`);
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.waitForURL(/\/callback\?/);
    await exchangeLatestCode(verifier, client);
    await page.goto(`${server.url.auth}/dashboard`);
    expect(await drawnRightToLeft(page.locator('li.app', { hasText: name }).locator('.app-head'))).toBe(true);
    await page
      .getByRole('region', { name: 'Northwind Studio' })
      .getByRole('link', { name: 'History' })
      .click();
    const connected = page.locator('ol.history li', { hasText: `ada connected ${name}` });
    expect(await drawnRightToLeft(connected.first())).toBe(true);
    await context.close();
  });
});
