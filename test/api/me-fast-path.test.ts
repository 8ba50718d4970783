import type { IncomingMessage } from 'node:http';
import { connect as openSocket, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { meFastPath } from '../../src/api/me-fast-path.js';
import type * as TurnEndModule from '../../src/base/turn-end.js';
import { waitsOf } from '../helpers/counted-turn-end.js';
import { accessLine as accessLineOf, sendToBoth, type Side } from '../helpers/fast-path-compare.js';
import { signIn, startTestServer, type TestServer, userId } from '../helpers/harness.js';
import { type RawResponse, rawRequest } from '../helpers/raw-http.js';
import { OLD_VERSION, testVersions } from '../helpers/test-versions.js';
import { connect } from '../auth/oauth-helpers.js';

/**
 * `GET /me` answered beside Fastify (src/api/me-fast-path.ts) must be indistinguishable from the route: the same
 * status, headers in the same order, body, access log line and metrics; and every request it does not serve from its
 * caches must reach the route. One server with the fast path, one with REST_FAST_PATH=off, the same requests to both.
 */
// Counts the answers that wait for the end of the event loop's turn (test/helpers/counted-turn-end.ts).
const waits = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/base/turn-end.js', async (importOriginal) =>
  (await import('../helpers/counted-turn-end.js')).countedTurnEnd(
    await importOriginal<typeof TurnEndModule>(),
    waits,
  ),
);

let fast: TestServer;
let slow: TestServer;
const tokens = { fast: '', slow: '' };
const ids = { fast: '', slow: '' };

beforeAll(async () => {
  // OAuth user:read tokens for /me too (docs/contract.md#authentication), so that both token kinds are compared.
  const env = { METRICS_PORT: '0', OAUTH_USER_RESOURCES: 'on', AGENCY_MCP_URL: 'http://127.0.0.1:4102' };
  [fast, slow] = await Promise.all([
    startTestServer({ env, versions: testVersions }),
    startTestServer({ env: { ...env, REST_FAST_PATH: 'off' }, versions: testVersions }),
  ]);
  tokens.fast = (await signIn(fast)).token;
  tokens.slow = (await signIn(slow)).token;
  ids.fast = await userId(fast);
  ids.slow = await userId(slow);
});
afterAll(() => Promise.all([fast?.close(), slow?.close()]));

const server = (side: Side) => (side === 'fast' ? fast : slow);

interface Sent {
  method?: string;
  path?: string;
  headers?: [string, string][];
  /** Another token than the side's session token. */
  token?: Record<Side, string>;
}

function send(side: Side, o: Sent = {}) {
  return rawRequest(`${server(side).url.api}${o.path ?? '/me'}`, {
    method: o.method ?? 'GET',
    headers: [['Authorization', `Bearer ${(o.token ?? tokens)[side]}`], ...(o.headers ?? [])],
  });
}

/** The response with what differs by nature between two servers (ids, dates, the request id) made equal. */
function comparable(side: Side, r: RawResponse) {
  const requestId = r.header('x-request-id') ?? '';
  const scrub = (s: string) =>
    s.replaceAll(ids[side], 'usr_X').replaceAll(requestId, 'req_X').replaceAll(server(side).url.api, 'API');
  const headers = Object.entries(r.headers)
    .filter(([name]) => name !== 'date')
    .map(([name, values]) => [name, values.map(scrub)]);
  return { status: r.status, headers, body: scrub(r.body) };
}

const COUNTERS = /^svc_(http_requests|cache_lookups)_total\{/;
const accessLine = (side: Side, requestId: string) => accessLineOf(server(side), requestId);

const both = (o: Sent = {}) => sendToBoth({ fast, slow }, COUNTERS, (side) => send(side, o));

describe('GET /me beside Fastify answers exactly what the route answers', () => {
  it.each([
    ['no Svc-Version', []],
    ['a valid Svc-Version (an older shape)', [['Svc-Version', OLD_VERSION]]],
    ['the latest Svc-Version, odd casing', [['sVC-vERSION', '2026-09-24.albus']]],
    ['an unknown Svc-Version (the route refuses it)', [['Svc-Version', '2020-01-01.nope']]],
    [
      'two Svc-Version headers',
      [
        ['Svc-Version', OLD_VERSION],
        ['Svc-Version', OLD_VERSION],
      ],
    ],
    ['a second Authorization header', [['Authorization', 'Bearer x']]],
  ] as [string, [string, string][]][])('%s', async (_name, headers) => {
    await both(); // the caches hold the token, its session and the user from here on
    const { a, b, fastCounted, slowCounted } = await both({ headers });
    expect(comparable('fast', a)).toEqual(comparable('slow', b));
    expect(accessLine('fast', a.header('x-request-id')!)).toEqual(
      accessLine('slow', b.header('x-request-id')!),
    );
    expect(fastCounted).toEqual(slowCounted);
  });

  it('the cached shapes are answered beside Fastify over the wire: the route never runs for them', async () => {
    await both(); // warm: the caches hold the token, its session and the user
    const routeReads = { fast: 0, slow: 0 };
    const restore = (['fast', 'slow'] as const).map((side) => {
      const users = server(side).services.ctx.users;
      const get = users.get.bind(users);
      users.get = (id: string) => {
        routeReads[side]++;
        return get(id);
      };
      return () => {
        users.get = get;
      };
    });
    try {
      for (const headers of [[], [['Svc-Version', OLD_VERSION]]] as [string, string][][]) {
        const { a } = await both({ headers });
        expect(a.status).toBe(200);
      }
    } finally {
      for (const r of restore) r();
    }
    // The route reads the user through the cache's `get`; the fast path only peeks at it.
    expect(routeReads).toEqual({ fast: 0, slow: 2 });
  });

  it("a fast answer is written with the turn's other answers: it waits for the turn's end, the route's does not", async () => {
    await both();
    const me = (side: Side) => () =>
      fetch(`${server(side).url.api}/me`, { headers: { authorization: `Bearer ${tokens[side]}` } });
    expect(await waitsOf(waits, me('fast'))).toEqual({ status: 200, waits: 1 });
    expect(await waitsOf(waits, me('slow'))).toEqual({ status: 200, waits: 0 });
  });

  it.each([
    ['HEAD', { method: 'HEAD' }],
    ['a query string', { path: '/me?x=1' }],
    ['a trailing slash', { path: '/me/' }],
  ])('%s', async (_name, o) => {
    await both();
    const { a, b } = await both(o);
    expect(comparable('fast', a)).toEqual(comparable('slow', b));
  });

  it('an OAuth user:read token', async () => {
    const scope = 'user:read';
    const oauth = {
      fast: (await connect(fast, { resource: fast.url.api, scope })).tokens['access_token']!,
      slow: (await connect(slow, { resource: slow.url.api, scope })).tokens['access_token']!,
    };
    await both({ token: oauth }); // the caches hold the token, its connection, the user and the client's pin
    const { a, b, fastCounted, slowCounted } = await both({ token: oauth });
    expect(a.status).toBe(200);
    expect(comparable('fast', a)).toEqual(comparable('slow', b));
    expect(fastCounted).toEqual(slowCounted);
    expect(fastAnswer({ token: oauth.fast })?.status).toBe(200);
  });

  it('an agency MCP access token (another audience, no user:read) falls through, and the route refuses it', async () => {
    const agency = {
      fast: (await connect(fast, { resource: `${fast.url.agencyMcp}/mcp` })).tokens['access_token']!,
      slow: (await connect(slow, { resource: `${slow.url.agencyMcp}/mcp` })).tokens['access_token']!,
    };
    // Verified for its own audience, as the agency MCP server does: the verified-token caches now hold it.
    for (const [server, token] of [
      [fast, agency.fast],
      [slow, agency.slow],
    ] as const) {
      const audience = `${server.url.agencyMcp}/mcp`;
      await server.services.ctx.verifier.verify(token, audience, ['oauth']);
      expect(server.services.ctx.verifier.cachedPrincipal(token, audience, ['oauth'])).toBeDefined();
    }
    const { a, b, fastCounted, slowCounted } = await both({ token: agency });
    expect(a.status).toBe(401);
    expect(comparable('fast', a)).toEqual(comparable('slow', b));
    expect(fastCounted).toEqual(slowCounted);
    expect(fastAnswer({ token: agency.fast })).toBeUndefined();
  });
});

/** What the fast path does with a request, called directly on the server's own context. */
function fastAnswer(o: { method?: string; url?: string; headers?: [string, string][]; token?: string }) {
  const rawHeaders = [
    'Host',
    'x',
    ...(o.token === undefined ? [] : ['Authorization', `Bearer ${o.token}`]),
    ...(o.headers ?? []).flat(),
  ];
  const request = {
    method: o.method ?? 'GET',
    url: o.url ?? '/me',
    rawHeaders,
  } as unknown as IncomingMessage;
  return meFastPath(fast.services.ctx)(request);
}

describe('GET /me beside Fastify on a connection used the way clients use it', () => {
  const request = (path: string, last = false) =>
    `GET ${path} HTTP/1.1\r\nHost: svc\r\nAuthorization: Bearer ${tokens.fast}\r\n` +
    `${last ? 'Connection: close\r\n' : ''}\r\n`;

  function socketTo(): Socket {
    const url = new URL(fast.url.api);
    return openSocket(Number(url.port), url.hostname);
  }

  /** Writes `requests` in one write on one connection; resolves with all the server sent until it closed. */
  function pipelined(requests: string[]): Promise<string> {
    return new Promise((resolve, reject) => {
      const socket = socketTo();
      const chunks: Buffer[] = [];
      socket.on('data', (c: Buffer) => chunks.push(c));
      socket.on('error', reject);
      socket.on('end', () => resolve(Buffer.concat(chunks).toString()));
      socket.write(requests.join(''));
    });
  }

  it("pipelined requests get their answers in order, the fast path's and the route's alike", async () => {
    await send('fast'); // the caches hold the token, its session and the user from here on
    const waited = waits.count;
    const text = await pipelined([request('/me'), request('/health'), request('/me', true)]);
    expect([...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1])).toEqual(['200', '200', '200']);
    // The two /me answers came from the fast path, written at the end of their turns; /health in between.
    expect(waits.count - waited).toBe(2);
    const [first, health, last] = [
      text.indexOf(ids.fast),
      text.indexOf('"healthy"'),
      text.lastIndexOf(ids.fast),
    ];
    expect(first).toBeGreaterThan(-1);
    expect(first < health && health < last).toBe(true);
    const requestIds = [...text.matchAll(/^x-request-id: (\S+)/gim)].map((m) => m[1]);
    expect(new Set(requestIds).size).toBe(3);
  });

  it('clients that close or half-close right behind their request cost their connections only', async () => {
    await send('fast');
    const errorsBefore = fast.logs.lines.filter((l) => Number(l['level']) >= 50).length;
    const clients = Array.from({ length: 10 }, (_, i) => {
      const socket = socketTo();
      socket.on('error', () => {});
      let received = '';
      socket.on('data', (c: Buffer) => (received += c.toString()));
      const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(received)));
      // Half the clients close at once after writing their request; half half-close with it (its FIN right behind).
      if (i % 2) socket.end(request('/me'));
      else socket.write(request('/me'), () => socket.destroy());
      return { halfClosed: i % 2 === 1, closed };
    });
    for (const { halfClosed, closed } of clients) {
      const received = await closed;
      // A half-closed client still reads: it gets its answer, then the server closes.
      if (halfClosed) expect(received).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
    }
    expect((await send('fast')).status).toBe(200);
    expect(fast.logs.lines.filter((l) => Number(l['level']) >= 50).length).toBe(errorsBefore);
  });
});

describe('the fast path serves only what it holds in memory, and leaves the rest to the route', () => {
  it('answers a cached token with a live session and a cached user', async () => {
    await send('fast');
    expect(fastAnswer({ token: tokens.fast })).toMatchObject({ status: 200, route: '/me' });
    const headers = fastAnswer({ token: tokens.fast, headers: [['Svc-Version', OLD_VERSION]] })?.headers;
    expect(headers?.[headers.indexOf('svc-version') + 1]).toBe(OLD_VERSION);
  });

  it.each([
    ['HEAD', { method: 'HEAD' }],
    ['POST', { method: 'POST' }],
    ['a query string', { url: '/me?x=1' }],
    ['another path', { url: '/health' }],
    ['a body', { headers: [['Content-Length', '0']] as [string, string][] }],
    ['chunked framing', { headers: [['Transfer-Encoding', 'chunked']] as [string, string][] }],
    ['a bad Svc-Version', { headers: [['Svc-Version', 'latest']] as [string, string][] }],
    ['an empty Svc-Version', { headers: [['Svc-Version', '']] as [string, string][] }],
    ['two Authorization headers', { headers: [['authorization', 'Bearer x']] as [string, string][] }],
    ['no token', { token: undefined }],
  ])('%s falls through', async (_name, o) => {
    await send('fast');
    expect(fastAnswer({ token: tokens.fast, ...o })).toBeUndefined();
  });

  it('a token never verified here falls through, and is answered from memory once the route has verified it', async () => {
    const { token } = await signIn(fast);
    expect(fastAnswer({ token })).toBeUndefined();
    const res = await rawRequest(`${fast.url.api}/me`, { headers: [['Authorization', `Bearer ${token}`]] });
    expect(res.status).toBe(200);
    expect(fastAnswer({ token })).toMatchObject({ status: 200 });
  });

  it('a revoked session falls through and the route refuses it', async () => {
    const { token } = await signIn(fast);
    await rawRequest(`${fast.url.api}/me`, { headers: [['Authorization', `Bearer ${token}`]] });
    const del = await fetch(`${fast.url.auth}/api/sessions/current`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${token}` },
    });
    expect(del.status).toBe(204);
    expect(fastAnswer({ token })).toBeUndefined();
    const res = await rawRequest(`${fast.url.api}/me`, { headers: [['Authorization', `Bearer ${token}`]] });
    expect(res.status).toBe(401);
  });

  it('a liveness or user entry older than LIVENESS_CACHE_SECONDS falls through (the route reads them again)', async () => {
    await send('fast');
    fast.clock.advance(fast.config.livenessCacheSeconds * 1000);
    expect(fastAnswer({ token: tokens.fast })).toBeUndefined();
    expect((await send('fast')).status).toBe(200);
    expect(fastAnswer({ token: tokens.fast })).toMatchObject({ status: 200 });
  });

  it('an expired token falls through and the route refuses it', async () => {
    const { token } = await signIn(fast);
    await rawRequest(`${fast.url.api}/me`, { headers: [['Authorization', `Bearer ${token}`]] });
    expect(fastAnswer({ token })).toMatchObject({ status: 200 });
    fast.clock.advance(fast.config.sessionTtlSeconds * 1000);
    expect(fastAnswer({ token })).toBeUndefined();
    const res = await rawRequest(`${fast.url.api}/me`, { headers: [['Authorization', `Bearer ${token}`]] });
    expect(res.status).toBe(401);
    expect(res.header('www-authenticate')).toContain('invalid_token');
  });
});
