import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type * as TurnEndModule from '../../src/base/turn-end.js';
import { signIn, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';

// Counts the answers that wait for the end of the event loop's turn (base/turn-end.ts): every fast-path answer does,
// so that a turn's answers are written together; what Fastify or the SDK answers does not. The store's shared read
// waits through the module's own `afterTurnAnswers`, which this does not count.
const waits = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/base/turn-end.js', async (importOriginal) => {
  const original = await importOriginal<typeof TurnEndModule>();
  return {
    ...original,
    endOfTurn: () => {
      waits.count++;
      return original.endOfTurn();
    },
  };
});

let server: TestServer;
let token: string;
beforeAll(async () => {
  server = await startTestServer();
  token = (await signIn(server)).token;
});
afterAll(() => server.close());

/** How many answers waited for the turn's end while `request` ran. */
async function waitsOf(request: () => Promise<Response>): Promise<{ status: number; waits: number }> {
  const before = waits.count;
  const res = await request();
  await res.text();
  return { status: res.status, waits: waits.count - before };
}

const me = (bearer = token) =>
  fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${bearer}` } });

it("GET /me answered by the fast path waits for the turn's end; an answer of the route does not", async () => {
  await (await me()).text(); // the first request fills the caches the fast path answers from
  expect(await waitsOf(() => me())).toEqual({ status: 200, waits: 1 });
  expect(await waitsOf(() => me('not-a-token'))).toEqual({ status: 401, waits: 0 });
});

it("an MCP tool call answered by the fast path waits for the turn's end; the SDK's answers do not", async () => {
  const endpoint = `${server.url.mcp}/mcp`;
  const getMe = () => modernRequest(endpoint, 'tools/call', { name: 'get_me', arguments: {} }, { token });
  await (await getMe()).text();
  expect(await waitsOf(getMe)).toEqual({ status: 200, waits: 1 });
  expect(await waitsOf(() => modernRequest(endpoint, 'tools/list', {}, { token }))).toEqual({
    status: 200,
    waits: 0,
  });
});
