import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { OpenApiChecker } from '../helpers/openapi.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ seed: false });
});
afterAll(() => server.close());

it('GET /health answers healthy with whole seconds of process uptime', async () => {
  const openapi = await OpenApiChecker.fetch(server.url.api);
  const res = await fetch(`${server.url.api}/health`);
  expect(res.status).toBe(200);
  const body = (await openapi.check('GET', '/health', res)) as { status: string; uptime: number };
  expect(body.status).toBe('healthy');
  expect(Number.isInteger(body.uptime)).toBe(true);
  // The servers run in this process, so its uptime is theirs.
  expect(body.uptime).toBeGreaterThanOrEqual(0);
  expect(body.uptime).toBeLessThanOrEqual(Math.floor(process.uptime()));
  expect(body.uptime).toBeGreaterThanOrEqual(Math.floor(process.uptime()) - 1);
});

it('HEAD /health answers without a body', async () => {
  const res = await fetch(`${server.url.api}/health`, { method: 'HEAD' });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe('');
});

it('needs no token', async () => {
  expect(
    (await fetch(`${server.url.api}/health`, { headers: { authorization: 'Bearer garbage' } })).status,
  ).toBe(200);
});
