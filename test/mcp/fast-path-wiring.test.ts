import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type * as TurnEndModule from '../../src/base/turn-end.js';
import type * as UserServerModule from '../../src/mcp/user-server.js';
import { waitsOf } from '../helpers/counted-turn-end.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest, post } from '../helpers/mcp.js';

// Counts the SDK servers the user MCP endpoint builds: the fast path must answer canonical get_me without one.
const built = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/mcp/user-server.js', async (importOriginal) => {
  const original = await importOriginal<typeof UserServerModule>();
  const { countedFactory } = await import('../helpers/counted-factory.js');
  return { ...original, userServerFactory: countedFactory(original.userServerFactory, built) };
});
// Counts the answers that wait for the end of the event loop's turn (test/helpers/counted-turn-end.ts).
const waits = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/base/turn-end.js', async (importOriginal) =>
  (await import('../helpers/counted-turn-end.js')).countedTurnEnd(
    await importOriginal<typeof TurnEndModule>(),
    waits,
  ),
);

let server: TestServer;
let token: string;
beforeAll(async () => {
  server = await startTestServer();
  token = (await signIn(server)).token;
});
afterAll(() => server.close());

const endpoint = () => `${server.url.mcp}/mcp`;

it('answers canonical tools/call get_me on both wires without building an SDK server', async () => {
  const before = built.count;
  expect(
    (await modernRequest(endpoint(), 'tools/call', { name: 'get_me', arguments: {} }, { token })).status,
  ).toBe(200);
  const legacy = await post(
    endpoint(),
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'get_me' } },
    { token, headers: { 'mcp-protocol-version': '2025-11-25' } },
  );
  expect(legacy.status).toBe(200);
  expect(built.count).toBe(before);
});

it('hands everything else to the SDK', async () => {
  const before = built.count;
  expect((await modernRequest(endpoint(), 'tools/list', {}, { token })).status).toBe(200);
  expect(built.count).toBe(before + 1);
});

it("answers get_me with the turn's other answers: it waits for the turn's end, the SDK's answer does not", async () => {
  const getMe = () => modernRequest(endpoint(), 'tools/call', { name: 'get_me', arguments: {} }, { token });
  await (await getMe()).text();
  expect(await waitsOf(waits, getMe)).toEqual({ status: 200, waits: 1 });
  expect(await waitsOf(waits, () => modernRequest(endpoint(), 'tools/list', {}, { token }))).toEqual({
    status: 200,
    waits: 0,
  });
});
