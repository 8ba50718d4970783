import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../agency-mcp/helpers.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { rawRequest } from '../helpers/raw-http.js';

/**
 * Transport bounds on every surface, through raw sockets: a request whose body never finishes is cut within
 * REQUEST_TIMEOUT_SECONDS (the slow-body attack held connections open for over 330 s), and one address cannot hold
 * more than MAX_CONNECTIONS_PER_IP connections.
 */

let server: TestServer;
const SURFACES = ['api', 'mcp', 'agencyMcp', 'auth'] as const;
/** A valid bearer token per surface, so that the MCP hosts (which authenticate first) wait for the body. */
const bearer: Partial<Record<(typeof SURFACES)[number], string>> = {};

beforeAll(async () => {
  server = await startTestServer({ env: { REQUEST_TIMEOUT_SECONDS: '1', MAX_CONNECTIONS_PER_IP: '3' } });
  bearer.mcp = (await signIn(server)).token;
  bearer.agencyMcp = (await grant(server)).token;
});
afterAll(() => server?.close());

function open(url: string): Promise<Socket> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(u.port), u.hostname, () => resolve(socket));
    socket.on('error', reject);
  });
}

/** Resolves with what the server wrote once it closes the connection, and how long that took. */
function untilClosed(socket: Socket): Promise<{ text: string; ms: number }> {
  const t0 = Date.now();
  let text = '';
  socket.on('data', (c) => (text += c.toString()));
  return new Promise((resolve) => socket.on('close', () => resolve({ text, ms: Date.now() - t0 })));
}

describe(`slow request bodies are cut on every surface (${ENGINE})`, () => {
  for (const surface of SURFACES) {
    it(`${surface}: Content-Length 1000, 13 bytes, then silence → 408 and the connection closed`, async () => {
      const url = new URL(server.url[surface]);
      const socket = await open(url.toString());
      const closed = untilClosed(socket);
      const auth = bearer[surface] ? `Authorization: Bearer ${bearer[surface]}\r\n` : '';
      socket.write(
        `POST /mcp HTTP/1.1\r\nHost: ${url.host}\r\n${auth}Accept: application/json, text/event-stream\r\n` +
          `Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"jsonrpc":"`,
      );
      const { text } = await closed;
      expect(text).toMatch(/^HTTP\/1\.1 408 /);
    });
  }
});

describe(`connections per client address are capped (${ENGINE})`, () => {
  it('the fourth connection from one address is closed at once; the first three still work', async () => {
    const url = server.url.api;
    const held = [await open(url), await open(url), await open(url)];
    const fourth = await open(url);
    const { text } = await untilClosed(fourth);
    expect(text).toBe('');
    // A client reconnecting in a loop: 20 more refused, one warning (a line each before, the log flooded).
    for (let i = 0; i < 20; i++) await untilClosed(await open(url));
    const warnings = server.logs.lines.filter((l) => String(l['msg']).startsWith('connections refused'));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({ max: 3, refused: 1 });
    const first = held[0]!;
    const answered = untilClosed(first);
    first.write(`GET /health HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`);
    expect((await answered).text).toMatch(/^HTTP\/1\.1 200 /);
    for (const s of held) s.destroy();
    // Once they are closed, the address may connect again.
    await new Promise((r) => setTimeout(r, 50));
    const again = await open(url);
    const ok = untilClosed(again);
    again.write(`GET /health HTTP/1.1\r\nHost: ${new URL(url).host}\r\nConnection: close\r\n\r\n`);
    expect((await ok).text).toMatch(/^HTTP\/1\.1 200 /);
  });
  it("the operator's proxies are not capped (every client behind them shares their address); other peers are", async () => {
    const behind = await startTestServer({ env: { MAX_CONNECTIONS_PER_IP: '3', TRUST_PROXY: 'loopback' } });
    const elsewhere = await startTestServer({
      env: { MAX_CONNECTIONS_PER_IP: '3', TRUST_PROXY: '192.0.2.1' },
    });
    const sockets: Socket[] = [];
    const opened = async (url: string) => {
      const socket = await open(url);
      sockets.push(socket);
      return socket;
    };
    try {
      const fromProxy = await Promise.all(Array.from({ length: 6 }, () => opened(behind.url.api)));
      const sixth = fromProxy[5]!;
      const answered = untilClosed(sixth);
      sixth.write(
        `GET /health HTTP/1.1\r\nHost: ${new URL(behind.url.api).host}\r\nConnection: close\r\n\r\n`,
      );
      expect((await answered).text).toMatch(/^HTTP\/1\.1 200 /);
      // Before, any TRUST_PROXY turned the cap off for every peer.
      for (let i = 0; i < 3; i++) await opened(elsewhere.url.api);
      const fourth = untilClosed(await opened(elsewhere.url.api)).then(({ text }) => text);
      const stillOpen = new Promise((r) => setTimeout(() => r('still open after 5 s'), 5000).unref());
      expect(await Promise.race([fourth, stillOpen])).toBe('');
    } finally {
      for (const socket of sockets) socket.destroy();
      await Promise.all([behind.close(), elsewhere.close()]);
    }
  });
});

describe(`idle keep-alive connections (${ENGINE})`, () => {
  it('are kept for KEEP_ALIVE_TIMEOUT_SECONDS after an answer, then closed by the server', async () => {
    const short = await startTestServer({ env: { KEEP_ALIVE_TIMEOUT_SECONDS: '2' } });
    try {
      const url = new URL(short.url.api);
      const socket = await open(url.toString());
      let closedAt = 0;
      socket.on('close', () => (closedAt = Date.now()));
      const answered = new Promise<string>((resolve) => socket.once('data', (c) => resolve(c.toString())));
      socket.write(`GET /health HTTP/1.1\r\nHost: ${url.host}\r\n\r\n`);
      expect(await answered).toMatch(/^HTTP\/1\.1 200 [^]*keep-alive: timeout=2/i);
      const answeredAt = Date.now();
      await new Promise((r) => setTimeout(r, 1000));
      expect(closedAt).toBe(0);
      await new Promise((r) => setTimeout(r, 3000));
      expect(closedAt).toBeGreaterThan(answeredAt + 1000);
      socket.destroy();
    } finally {
      await short.close();
    }
  });
});

describe(`Expect: 100-continue (${ENGINE})`, () => {
  /** The first status line the server writes after the headers. */
  async function firstAnswer(url: string, contentLength: number): Promise<string> {
    const socket = await open(url);
    const first = new Promise<string>((resolve) => socket.once('data', (c) => resolve(c.toString())));
    socket.write(
      `POST /oauth/register HTTP/1.1\r\nHost: ${new URL(url).host}\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${contentLength}\r\nExpect: 100-continue\r\n\r\n`,
    );
    const text = await first;
    socket.destroy();
    return text.split('\r\n', 1)[0]!;
  }

  it('a body over the limit is refused before it is sent; one within it is asked for', async () => {
    const limit = server.services.ctx.config.bodyLimitBytes;
    // Before, 100 Continue came first either way: the client sent the whole body to be refused after it.
    expect(await firstAnswer(server.url.auth, limit + 1)).toBe('HTTP/1.1 413 Payload Too Large');
    expect(await firstAnswer(server.url.auth, 100)).toBe('HTTP/1.1 100 Continue');
  });
});

describe(`an Expect other than 100-continue (${ENGINE})`, () => {
  // node:http answered each of these 417 by itself: no request id, no body, no access-log line.
  it("is served as if absent, on the fast paths and on Fastify's, with the request id and a log line", async () => {
    for (const expectation of ['teapot', '']) {
      const expectField: [string, string] = ['Expect', expectation];
      const me = await rawRequest(`${server.url.api}/me`, {
        headers: [expectField, ['Authorization', `Bearer ${bearer.mcp}`]],
      });
      expect(me.status, `/me, Expect: ${expectation}`).toBe(200);
      expect(me.header('x-request-id')).toMatch(/^req_/);
      const health = await rawRequest(`${server.url.api}/health`, { headers: [expectField] });
      expect(health.status).toBe(200);
      const session = await rawRequest(`${server.url.auth}/api/sessions`, {
        method: 'POST',
        headers: [expectField, ['Content-Type', 'application/json']],
        body: JSON.stringify({ username: 'ada', password: 'ada-demo-password' }),
      });
      expect(session.status).toBe(201);
      const line = server.logs.lines.findLast((l) => l['msg'] === 'request' && l['path'] === '/health');
      expect(line?.['request_id']).toBe(health.header('x-request-id'));
    }
  });
});

describe(`CONNECT (${ENGINE})`, () => {
  // node:http, with no listener for CONNECT, closed the socket without an answer.
  it("is refused with a 400 in each surface's shape, with the request id", async () => {
    for (const surface of SURFACES) {
      const answer = await rawRequest(server.url[surface], { method: 'CONNECT', target: '127.0.0.1:443' });
      expect(answer.status, surface).toBe(400);
      const requestId = answer.header('x-request-id');
      expect(requestId).toMatch(/^req_/);
      const message = 'CONNECT is not served: this server opens no tunnels (RFC 9110 §9.3.6)';
      if (surface === 'mcp' || surface === 'agencyMcp')
        expect(answer.json()).toMatchObject({ jsonrpc: '2.0', error: { message } });
      else
        expect(answer.json()).toEqual({
          error: { type: 'invalid_request_error', code: 'invalid_request', message, request_id: requestId },
        });
    }
  });
});
