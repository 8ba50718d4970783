import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Browser, chromium } from 'playwright-core';

/** Debian's chromium (apt-get install -y chromium), or CHROMIUM_PATH. */
export const CHROMIUM = process.env['CHROMIUM_PATH'] ?? '/usr/bin/chromium';

/** Headless chromium as this machine runs it: no sandbox (root), no background traffic to the closed network. */
export function launchChromium(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
    ],
  });
}

export interface CallbackServer {
  /** `http://127.0.0.1:<port>/callback`, the redirect URI. */
  url: string;
  /** Every redirect the browser made to it, in order. */
  received: URL[];
  close(): Promise<void>;
}

/** An OAuth client's loopback redirect endpoint (RFC 8252 §7.3) that records each authorization response. */
export async function startCallbackServer(): Promise<CallbackServer> {
  const received: URL[] = [];
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    // Only the redirects: chromium also asks this origin for /favicon.ico once the page loads.
    if (url.pathname === '/callback') received.push(new URL(url.pathname + url.search, callback.url));
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end('You can close this window.');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const callback: CallbackServer = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/callback`,
    received,
    close: async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
  return callback;
}
