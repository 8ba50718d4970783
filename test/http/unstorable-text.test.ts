import { afterAll, beforeAll, expect, it } from 'vitest';
import { isUnstorableText } from '../../src/store/pg-errors.js';
import { AGENCY_SECRET, grant, projectOf } from '../agency-mcp/helpers.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';

/**
 * A text value with U+0000, wherever a request carries it: PostgreSQL refuses to store one (SQLSTATE 22021), and that
 * refusal is the request's fault, answered 400 in the surface's own shape, never a 500 (http/framework-errors.ts, for
 * every surface and for the dashboard API's in-process calls alike). SQLite stores it.
 */
let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
});
afterAll(() => server?.close());

it(`sign-in with a NUL in the username is the request's fault (${ENGINE})`, async () => {
  const res = await fetch(`${server.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username: 'ada\u0000', password: 'ada-demo-password' }),
  });
  const body = (await res.json()) as { error: { code: string; message: string } };
  expect(res.status).toBeGreaterThanOrEqual(400);
  expect(res.status).toBeLessThan(500);
  if (ENGINE === 'postgres') {
    expect(res.status).toBe(400);
    expect(body.error).toMatchObject({ code: 'invalid_request', message: expect.stringMatching(/U\+0000/) });
  }
});

it(`an agency tool writing a NUL answers the tool error of a refused value, not an internal error (${ENGINE})`, async () => {
  const g = await grant(server);
  const project = await projectOf(server, g);
  const res = await modernRequest(
    `${server.url.agencyMcp}/mcp`,
    'tools/call',
    { name: 'create_task', arguments: { project_id: project, title: 'Plan\u0000' } },
    { token: g.token },
  );
  expect(res.status).toBe(200);
  const text = await res.text();
  expect(text).not.toContain('internal_error');
  if (ENGINE === 'postgres') expect(text).toMatch(/cannot be stored \(U\+0000\)/);
});

it('tells PostgreSQL’s refusal of a character from its other errors', () => {
  expect(isUnstorableText({ code: '22021', severity: 'ERROR' })).toBe(true);
  expect(isUnstorableText({ code: '22P05', severity: 'ERROR' })).toBe(true);
  expect(isUnstorableText({ code: '22P02', severity: 'ERROR' })).toBe(false);
  expect(isUnstorableText({ code: '22021' })).toBe(false);
});
