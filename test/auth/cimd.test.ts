import { readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/config.js';
import { makeTestCertificate } from '../helpers/certificate.js';
import { startNameServer } from '../helpers/dns-server.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { authorize, authorizeQuery, Browser, pkce, token } from './oauth-helpers.js';

/**
 * Client ID Metadata Documents against a real https server on 127.0.0.1 with a certificate made at test time. The
 * authorization server trusts it through the test-only CIMD_TEST_CA_FILE, and CIMD_TEST_ALLOW_LOOPBACK lets it reach
 * loopback (and nothing else special-use); a second server without that setting shows the address refusal.
 */

const AGENCY_MCP_URL = 'http://127.0.0.1:4102';
const REDIRECT = 'http://127.0.0.1:7777/callback';
let dir: string;
let docs: Server;
let base: string;
let server: TestServer;
let strict: TestServer;
const hits: Record<string, number> = {};
const concurrent = { now: 0, max: 0 };

beforeAll(async () => {
  dir = makeTestCertificate('svc-cimd-');
  docs = createServer(
    { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) },
    (req, res) => {
      const path = (req.url ?? '/').split('?')[0]!;
      hits[path] = (hits[path] ?? 0) + 1;
      const self = `https://${req.headers.host}${req.url}`; // the URL as the fetcher named it
      const doc = (extra: Record<string, unknown> = {}) =>
        JSON.stringify({ client_id: self, client_name: 'Doc Agent', redirect_uris: [REDIRECT], ...extra });
      const json = (body: string, headers: Record<string, string> = {}) => {
        res.writeHead(200, { 'content-type': 'application/json', ...headers });
        res.end(body);
      };
      if (path.startsWith('/good')) return json(doc(), { 'cache-control': 'max-age=5' });
      if (path === '/long-cache') return json(doc(), { 'cache-control': 'max-age=999999' });
      if (path === '/mismatch') return json(doc({ client_id: `${base}/other` }));
      if (path === '/secret')
        return json(doc({ client_secret: 'x', token_endpoint_auth_method: 'client_secret_basic' }));
      if (path === '/not-json') return json('<html></html>');
      if (path === '/missing') {
        res.writeHead(404);
        return res.end();
      }
      if (path === '/redirect') {
        res.writeHead(302, { location: `${base}/good-target` });
        return res.end();
      }
      if (path === '/big') return json(doc({ padding: 'x'.repeat(6000) }));
      if (path === '/big-chunked') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write(doc().slice(0, -1));
        res.write(`,"padding":"${'y'.repeat(6000)}"}`);
        return res.end();
      }
      if (path === '/slow') {
        setTimeout(() => json(doc()), 4000).unref();
        return;
      }
      if (path.startsWith('/pause')) {
        concurrent.now++;
        concurrent.max = Math.max(concurrent.max, concurrent.now);
        setTimeout(() => {
          concurrent.now--;
          json(doc());
        }, 400);
        return;
      }
      if (path === '/coalesce') {
        setTimeout(() => json(doc()), 300);
        return;
      }
      res.writeHead(500);
      res.end();
    },
  );
  await new Promise<void>((r) => docs.listen(0, '127.0.0.1', r));
  base = `https://127.0.0.1:${(docs.address() as AddressInfo).port}`;
  const env = { AGENCY_MCP_URL, CIMD_TEST_CA_FILE: join(dir, 'cert.pem'), CIMD_FETCH_LIMIT_PER_IP: '1000' };
  server = await startTestServer({ env: { ...env, CIMD_TEST_ALLOW_LOOPBACK: 'on' } });
  strict = await startTestServer({ env });
});
afterAll(async () => {
  await Promise.all([server?.close(), strict?.close()]);
  docs?.closeAllConnections();
  await new Promise((r) => docs?.close(r));
  rmSync(dir, { recursive: true, force: true });
});

const authPage = async (s: TestServer, clientId: string) => {
  const b = new Browser(s.url.auth);
  await b.signIn('linus');
  return b.get(`/oauth2/auth?${authorizeQuery(s, { clientId, redirectUri: REDIRECT }, pkce().challenge)}`);
};

async function expectRefused(res: Response, why: RegExp) {
  expect(res.status).toBe(400);
  expect(res.headers.get('location')).toBeNull();
  const page = await res.text();
  expect(page).toMatch(/metadata document cannot be used|not known/);
  expect(page).toMatch(why);
}

/** A server of its own (loopback allowed, the test CA trusted) with `env` on top, for one test. */
const withServer = async (env: Record<string, string>, run: (s: TestServer) => Promise<void>) => {
  const s = await startTestServer({
    env: {
      AGENCY_MCP_URL,
      CIMD_TEST_CA_FILE: join(dir, 'cert.pem'),
      CIMD_TEST_ALLOW_LOOPBACK: 'on',
      ...env,
    },
  });
  try {
    await run(s);
  } finally {
    await s.close();
  }
};

describe(`Client ID Metadata Documents (${ENGINE})`, () => {
  it('a valid document: consent shows the client host and warns about the loopback redirect; codes exchange without fetching', async () => {
    const clientId = `${base}/good`;
    const browser = new Browser(server.url.auth);
    await browser.signIn('linus');
    const res = await browser.get(
      `/oauth2/auth?${authorizeQuery(server, { clientId, redirectUri: REDIRECT }, pkce().challenge)}`,
    );
    expect(res.status).toBe(200);
    const page = await res.text();
    expect(page).toContain('Doc Agent');
    expect(page).toContain(new URL(base).host);
    expect(page).toMatch(/on your own computer/);

    const { verifier, challenge } = pkce();
    const back = await authorize(server, browser, { clientId, redirectUri: REDIRECT }, challenge);
    const before = hits['/good'];
    const { res: tr, body } = await token(server, {
      grant_type: 'authorization_code',
      code: back.searchParams.get('code')!,
      code_verifier: verifier,
      client_id: clientId,
      redirect_uri: REDIRECT,
    });
    expect(tr.status).toBe(200);
    expect(body['access_token']).toBeTruthy();
    expect(hits['/good']).toBe(before);
    const stored = await server.services.ctx.db
      .selectFrom('oauth_clients')
      .selectAll()
      .where('client_id', '=', clientId)
      .executeTakeFirstOrThrow();
    expect(stored.kind).toBe('cimd');
    expect(JSON.parse(stored.metadata).redirect_uris).toEqual([REDIRECT]);
  });

  it('caches by HTTP headers clamped to at least 30 s, then fetches again', async () => {
    const clientId = `${base}/good-cache`;
    await authPage(server, clientId);
    await authPage(server, clientId);
    expect(hits['/good-cache']).toBe(1);
    server.clock.advance(10_000); // past max-age=5 but within the 30 s floor
    await authPage(server, clientId);
    expect(hits['/good-cache']).toBe(1);
    server.clock.advance(25_000);
    await authPage(server, clientId);
    expect(hits['/good-cache']).toBe(2);
  });

  it('caps the cache at one day', async () => {
    const clientId = `${base}/long-cache`;
    await authPage(server, clientId);
    const row = await server.services.ctx.db
      .selectFrom('oauth_clients')
      .select('metadata_expires_at')
      .where('client_id', '=', clientId)
      .executeTakeFirstOrThrow();
    expect(row.metadata_expires_at! - server.clock.now()).toBeLessThanOrEqual(24 * 3600_000);
  });

  it('concurrent fetches of one URL coalesce', async () => {
    const clientId = `${base}/coalesce`;
    const results = await Promise.all(Array.from({ length: 5 }, () => authPage(server, clientId)));
    expect(results.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    expect(hits['/coalesce']).toBe(1);
  });

  it('a refused document is remembered for 30 s: one fetch, not one per request', async () => {
    const clientId = `${base}/broken-twice`;
    await expectRefused(await authPage(server, clientId), /answered 500/);
    await expectRefused(await authPage(server, clientId), /answered 500/);
    expect(hits['/broken-twice']).toBe(1);
    server.clock.advance(31_000);
    await expectRefused(await authPage(server, clientId), /answered 500/);
    expect(hits['/broken-twice']).toBe(2);
  });

  it('the wall clock set back an hour: a refused document is fetched again after 30 s, not after the hour', async () => {
    const clientId = `${base}/broken-clock-back`;
    await expectRefused(await authPage(server, clientId), /answered 500/);
    server.clock.step(-3600_000);
    try {
      server.clock.advance(31_000);
      await expectRefused(await authPage(server, clientId), /answered 500/);
      expect(hits['/broken-clock-back']).toBe(2);
    } finally {
      server.clock.step(3600_000);
    }
  });

  it('the wall clock set forward an hour: a document read a moment ago is not fetched again within its lifetime', async () => {
    const clientId = `${base}/good-clock-forward`;
    expect((await authPage(server, clientId)).status).toBe(200);
    server.clock.step(3600_000);
    try {
      expect((await authPage(server, clientId)).status).toBe(200);
      expect(hits['/good-clock-forward']).toBe(1);
    } finally {
      server.clock.step(-3600_000);
    }
  });

  it('a document whose client_id does not equal its URL', async () => {
    await expectRefused(await authPage(server, `${base}/mismatch`), /does not equal its URL/);
  });
  it('a non-200 answer', async () => {
    await expectRefused(await authPage(server, `${base}/missing`), /answered 404/);
  });
  it('a redirect is not followed', async () => {
    await expectRefused(await authPage(server, `${base}/redirect`), /redirects/);
    expect(hits['/good-target']).toBeUndefined();
  });
  it('a body over 5 KiB (declared length)', async () => {
    await expectRefused(await authPage(server, `${base}/big`), /larger than 5 KiB/);
  });
  it('a body over 5 KiB (streamed without a length)', async () => {
    await expectRefused(await authPage(server, `${base}/big-chunked`), /larger than 5 KiB/);
  });
  it('a slow server (over about 3 s)', async () => {
    const t0 = Date.now();
    await expectRefused(await authPage(server, `${base}/slow`), /could not be fetched/);
    expect(Date.now() - t0).toBeLessThan(3900);
  });
  it('a document with a client secret (not a public client)', async () => {
    await expectRefused(await authPage(server, `${base}/secret`), /client_secret/);
  });
  it('a document that is not JSON', async () => {
    await expectRefused(await authPage(server, `${base}/not-json`), /not JSON/);
  });
  it('URL rules: fragment, userinfo, dot segments, no path', async () => {
    await expectRefused(await authPage(server, `${base}/good#x`), /fragment/);
    await expectRefused(await authPage(server, `https://user@127.0.0.1:1/good`), /user information/);
    await expectRefused(await authPage(server, `${base}/a/../good`), /path segments/);
    await expectRefused(await authPage(server, `${base}/a/%2E%2E/good`), /path segments/);
    await expectRefused(await authPage(server, `${base}/`), /must have a path/);
  });
  it('a special-use address is refused on the connected socket (127.0.0.1 literal) without the test allowance', async () => {
    const before = hits['/good'] ?? 0;
    await expectRefused(await authPage(strict, `${base}/good`), /could not be fetched/);
    expect(hits['/good'] ?? 0).toBe(before);
  });
  it('a host name resolving to a special-use address is refused (localhost)', async () => {
    const port = new URL(base).port;
    await expectRefused(await authPage(strict, `https://localhost:${port}/good`), /could not be fetched/);
  });
  it('private and link-local literals are refused even with the loopback allowance', async () => {
    await expectRefused(await authPage(server, 'https://10.0.0.1/client.json'), /could not be fetched/);
    await expectRefused(await authPage(server, 'https://169.254.169.254/latest'), /could not be fetched/);
    await expectRefused(await authPage(server, 'https://[::ffff:192.168.1.1]/c'), /could not be fetched/);
  });
  it("a host's name is resolved off the thread pool, by the name servers the resolver is given", async () => {
    // Before, dns.lookup (getaddrinfo) ignored them and read /etc/hosts: the document came, and nobody was asked.
    const names = await startNameServer({ a: { localhost: '127.0.0.1' } });
    try {
      await withServer({ CIMD_TEST_DNS_SERVERS: names.address }, async (s) => {
        const res = await authPage(s, `https://localhost:${new URL(base).port}/good-by-name`);
        expect(res.status).toBe(200);
        expect(await res.text()).toContain('Doc Agent');
      });
      expect(names.asked).toContainEqual({ name: 'localhost', type: 'A' });
    } finally {
      await names.close();
    }
  });
  it('hosts whose name server never answers are refused within the fetch limit, their queries ended with it', async () => {
    // A client can name hosts whose name server it runs and leaves silent. getaddrinfo ran two at a time for the whole
    // process, each for the system resolver's own 10 s whatever the fetch's limit: 16 such requests queued every other
    // lookup of the process (PostgreSQL's, Redis's connections by name) behind them for over a minute.
    const silent = await startNameServer({ silent: true });
    try {
      await withServer(
        {
          CIMD_TEST_DNS_SERVERS: silent.address,
          CIMD_FETCH_TIMEOUT_MS: '1000',
          CIMD_MAX_CONCURRENT_FETCHES: '16',
        },
        async (s) => {
          const hosts = Array.from({ length: 6 }, (_, i) => `h${i}.silent.test`);
          const pages = await Promise.all(hosts.map((h) => authPage(s, `https://${h}/client.json`)));
          for (const page of pages) await expectRefused(page, /could not be fetched/);
          for (const h of hosts) expect(silent.asked.map((q) => q.name)).toContain(h);
          const refusals = s.logs.lines.filter((l) => l['msg'] === 'metadata document refused');
          expect(refusals.map((l) => String(l['detail']))).toEqual(hosts.map(() => 'timed out'));
        },
      );
    } finally {
      await silent.close();
    }
  });
  it('the test-only settings are refused in production', () => {
    expect(() => loadConfig({ NODE_ENV: 'production', CIMD_TEST_ALLOW_LOOPBACK: 'on' })).toThrow(ConfigError);
    expect(() => loadConfig({ NODE_ENV: 'production', CIMD_TEST_CA_FILE: '/tmp/x.pem' })).toThrow(
      /^Invalid CIMD_TEST_CA_FILE="\/tmp\/x.pem": a test-only setting/,
    );
    expect(() => loadConfig({ NODE_ENV: 'production', CIMD_TEST_DNS_SERVERS: '127.0.0.1:53' })).toThrow(
      /^Invalid CIMD_TEST_DNS_SERVERS="127.0.0.1:53": a test-only setting/,
    );
  });
});

describe(`Client ID Metadata Documents that anyone can make us fetch and store (${ENGINE})`, () => {
  const storedCimd = async (s: TestServer) =>
    (
      await s.services.ctx.db
        .selectFrom('oauth_clients')
        .select('client_id')
        .where('kind', '=', 'cimd')
        .execute()
    ).length;

  it('a network failure is one generic message to the client (no port-scan or DNS oracle); the detail is logged', async () => {
    const res = await authPage(server, 'https://127.0.0.1:1/refused');
    const page = await res.text();
    expect(page).toMatch(/could not be fetched/);
    expect(page).not.toMatch(/ECONNREFUSED|connect|127\.0\.0\.1:1/);
    const line = server.logs.lines.find(
      (l) => l['msg'] === 'metadata document refused' && String(l['detail']).includes('ECONNREFUSED'),
    );
    expect(line).toBeDefined();
  });

  it('the stored documents are capped: 6 new documents with CIMD_MAX_CLIENTS=3 leave at most 3 rows', async () => {
    await withServer({ CIMD_MAX_CLIENTS: '3', CIMD_FETCH_LIMIT_PER_IP: '1000' }, async (s) => {
      for (let i = 0; i < 6; i++) await authPage(s, `${base}/good-cap-${i}-${Date.now()}`);
      expect(await storedCimd(s)).toBeLessThanOrEqual(3);
    });
  });

  it('new documents per client address are rate limited (CIMD_FETCH_LIMIT_PER_IP=2)', async () => {
    await withServer({ CIMD_FETCH_LIMIT_PER_IP: '2' }, async (s) => {
      const before = Object.values(hits).reduce((a, b) => a + b, 0);
      for (let i = 0; i < 2; i++)
        expect((await authPage(s, `${base}/good-budget-${i}-${Date.now()}`)).status).toBe(200);
      const third = await authPage(s, `${base}/good-budget-3-${Date.now()}`);
      expect(third.status).toBe(400);
      expect(await third.text()).toMatch(/too many new client metadata documents/);
      expect(Object.values(hits).reduce((a, b) => a + b, 0) - before).toBe(2);
    });
  });

  it('concurrent outbound fetches are capped (CIMD_MAX_CONCURRENT_FETCHES=2): 8 slow documents at once', async () => {
    await withServer({ CIMD_MAX_CONCURRENT_FETCHES: '2', CIMD_FETCH_LIMIT_PER_IP: '1000' }, async (s) => {
      concurrent.max = 0;
      const pages = await Promise.all(
        Array.from({ length: 8 }, (_, i) =>
          authPage(s, `${base}/pause-${i}-${Date.now()}`).then((r) => r.text()),
        ),
      );
      expect(concurrent.max).toBeLessThanOrEqual(2);
      expect(pages.filter((p) => /being fetched right now/.test(p)).length).toBeGreaterThan(0);
    });
  });
});
