import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CHROMIUM, launchChromium } from '../helpers/browser.js';
import { probeNode22 } from '../helpers/conformance.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { register } from './oauth-helpers.js';

/**
 * The official conformance runner's authorization-server scenarios (`conformance authorization`, 0.2 line, with
 * `--resource`), which need Node 22 (`npx -p node@22`). The runner prints an authorization URL and waits for the
 * callback; chromium plays the member (sign in, pick agency, Allow). It downloads the runner and Node 22 through npx.
 */

const VERSION = process.env['CONFORMANCE_VERSION'] ?? '0.2.0-alpha.12';
const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
let server: TestServer;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

// Like the MCP conformance suites: without Node 22 (fetched by npx) it fails and says why, never skips.
describe(`conformance authorization (${ENGINE})`, () => {
  beforeAll(async () => {
    const node22 = probeNode22();
    if (!node22.ok) throw new Error(`the conformance runner needs Node 22 (npx -p node@22): ${node22.why}`);
    server = await startTestServer({ env: { AGENCY_MCP_URL } });
  });
  afterAll(() => server?.close());

  it('passes the authorization-server scenarios', { timeout: 300_000 }, async () => {
    expect(existsSync(CHROMIUM)).toBe(true);
    const clientId = (
      await register(server, { redirect_uris: ['http://127.0.0.1/callback'], client_name: 'Conformance' })
    ).body['client_id'] as string;
    const port = await freePort();
    const child = spawn(
      'npx',
      [
        '-y',
        '-p',
        'node@22',
        '-p',
        `@modelcontextprotocol/conformance@${VERSION}`,
        'conformance',
        'authorization',
        '--url',
        server.url.auth,
        '--client-id',
        clientId,
        '--resource',
        `${AGENCY_MCP_URL}/mcp`,
        '--port',
        String(port),
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    const browser = await launchChromium();
    try {
      const authUrl = await new Promise<string>((resolve, reject) => {
        const onData = (c: Buffer) => {
          output += c.toString();
          const m = /(http:\/\/127\.0\.0\.1:\d+\/oauth2\/auth\?\S+)/.exec(output);
          if (m) resolve(m[1]!);
        };
        child.stdout.on('data', onData);
        child.stderr.on('data', onData);
        child.on('exit', (code) =>
          reject(new Error(`runner exited with ${code} before authorizing:\n${output}`)),
        );
      });
      const page = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
      page.setDefaultTimeout(15_000);
      await page.goto(authUrl);
      await page.getByLabel('Username').fill('ada');
      await page.getByLabel('Password').fill('ada-demo-password');
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.getByRole('heading', { name: 'Choose an agency' }).waitFor();
      await page.getByLabel(/Northwind Studio/).check();
      await page.getByRole('button', { name: 'Continue' }).click();
      await page.getByRole('button', { name: 'Allow' }).click();
      await page.waitForURL(/\/callback\?/);
      const code = await new Promise<number | null>((resolve) => {
        if (child.exitCode !== null) resolve(child.exitCode);
        child.removeAllListeners('exit');
        child.on('exit', resolve);
      });
      console.log(output.slice(output.indexOf('=== SUMMARY ===')));
      expect(output).toMatch(/authorization-server-metadata-endpoint: \d+ passed, 0 failed/);
      expect(output).toMatch(/authorization-code-grant: \d+ passed, 0 failed/);
      expect(code, output).toBe(0);
    } finally {
      await browser.close();
      if (child.exitCode === null) child.kill();
    }
  });
});
