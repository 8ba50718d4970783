import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import type * as AgencyServerModule from '../../src/agency-mcp/server.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';
import { AGENCY_SECRET, grant } from './helpers.js';

// Counts the SDK servers the agency MCP endpoint builds: no-argument reads in canonical form must not need one.
const built = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../src/agency-mcp/server.js', async (importOriginal) => {
  const original = await importOriginal<typeof AgencyServerModule>();
  const { countedFactory } = await import('../helpers/counted-factory.js');
  return { ...original, agencyServerFactory: countedFactory(original.agencyServerFactory, built) };
});

let server: TestServer;
let token: string;
beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
  token = (await grant(server)).token;
});
afterAll(() => server.close());

const call = (method: string, params: Record<string, unknown>) =>
  modernRequest(`${server.url.agencyMcp}/mcp`, method, params, { token });

it('answers a canonical no-argument read without building an SDK server', async () => {
  const before = built.count;
  expect((await call('tools/call', { name: 'list_clients', arguments: {} })).status).toBe(200);
  expect(built.count).toBe(before);
});

it('hands calls with arguments, and lists, to the SDK', async () => {
  const before = built.count;
  expect((await call('tools/call', { name: 'list_clients', arguments: { limit: 1 } })).status).toBe(200);
  expect((await call('tools/list', {})).status).toBe(200);
  expect(built.count).toBe(before + 2);
});

it('answers a write tool call whose arguments pass its schema without building an SDK server', async () => {
  const project = await server.services.ctx.db
    .selectFrom('projects')
    .select('id')
    .orderBy('id')
    .executeTakeFirstOrThrow();
  const before = built.count;
  const res = await call('tools/call', {
    name: 'create_task',
    arguments: { project_id: project.id, title: 'T' },
  });
  expect(res.status).toBe(200);
  expect(built.count).toBe(before);
  // Invalid arguments go to the SDK, which names the field.
  await call('tools/call', { name: 'create_task', arguments: { project_id: project.id } });
  expect(built.count).toBe(before + 1);
});
