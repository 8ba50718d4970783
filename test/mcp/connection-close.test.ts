import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { serverWithMcpTokens } from '../agency-mcp/helpers.js';
import { ENGINE, signIn, startTestServer } from '../helpers/harness.js';

/**
 * `Connection: close` on the MCP hosts' event-stream answers (the 2025-11-25 era answers `initialize` as one): the SDK
 * writes `Connection: keep-alive` on them, which overrode both the close a client asks for (RFC 9112 §9.6) and the
 * close a stop gives every answer in flight, so those connections stayed open.
 */

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
});

/** A connection to `base`: what the server wrote on it, and whether the server closed it within `ms`. */
function held(base: string, ms = 5000) {
  const url = new URL(base);
  const socket = connect(Number(url.port), url.hostname);
  const written = new Promise<{ text: string; closedByServer: boolean }>((resolve) => {
    let text = '';
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedByServer: false });
    }, ms);
    socket.on('data', (c) => (text += c.toString()));
    socket.on('end', () => {
      clearTimeout(timer);
      resolve({ text, closedByServer: true });
    });
  });
  return { socket, written };
}

/** The head of an MCP `initialize` with `token`, and `connection` when given. */
const head = (base: string, token: string, connection?: string) =>
  [
    'POST /mcp HTTP/1.1',
    `Host: ${new URL(base).host}`,
    `Authorization: Bearer ${token}`,
    'Accept: application/json, text/event-stream',
    'Content-Type: application/json',
    `Content-Length: ${Buffer.byteLength(INITIALIZE)}`,
    ...(connection ? [`Connection: ${connection}`] : []),
  ].join('\r\n') + '\r\n\r\n';

describe(`a client's Connection: close on an event-stream answer (${ENGINE})`, () => {
  const env = serverWithMcpTokens();

  for (const surface of ['mcp', 'agencyMcp'] as const) {
    it(`${surface}: the answer says close, and the server closes the connection after it`, async () => {
      const base = env.server.url[surface];
      const { socket, written } = held(base);
      socket.write(head(base, env.token[surface], 'close') + INITIALIZE);
      const { text, closedByServer } = await written;
      expect(text).toMatch(/^HTTP\/1\.1 200 /);
      expect(text).toMatch(/\r\ncontent-type: text\/event-stream\r\n/i);
      expect(text).toMatch(/\r\nconnection: close\r\n/i);
      expect(text).not.toMatch(/\r\nconnection: keep-alive\r\n/i);
      expect(closedByServer).toBe(true);
    });
  }
});

describe(`a stop with an event-stream answer in flight (${ENGINE})`, () => {
  it('the answer says close, the connection ends, and the stop completes', async () => {
    const server = await startTestServer();
    const base = server.url.mcp;
    const token = (await signIn(server)).token;
    // A load balancer's connection (keep-alive), the request in flight when the stop begins: its body half sent.
    const { socket, written } = held(base);
    socket.write(head(base, token) + INITIALIZE.slice(0, 10));
    await new Promise((r) => setTimeout(r, 200));
    const stopped = server.services.close().then(() => 'stopped' as const);
    await new Promise((r) => setTimeout(r, 200));
    socket.write(INITIALIZE.slice(10));
    const { text, closedByServer } = await written;
    expect(text).toMatch(/^HTTP\/1\.1 200 /);
    expect(text).toMatch(/\r\nconnection: close\r\n/i);
    expect(closedByServer).toBe(true);
    const timeout = new Promise((r) => setTimeout(() => r('still waiting'), 5000));
    expect(await Promise.race([stopped, timeout])).toBe('stopped');
    await server.close().catch(() => undefined);
  });
});
