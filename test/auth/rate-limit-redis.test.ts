import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../helpers/harness.js';

const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
let a: TestServer;
let b: TestServer;
beforeAll(async () => {
  // The per-address budget is shared by every run on this Redis for its window: not what this test is about.
  const env = { REDIS_URL, SIGNIN_LIMIT_PER_USERNAME: '3', SIGNIN_LIMIT_PER_IP: '1000000' };
  [a, b] = await Promise.all([startTestServer({ env }), startTestServer({ env })]);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

const signIn = (server: TestServer, username: string) =>
  fetch(`${server.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password: 'wrong-password' }),
  });

it('with REDIS_URL, two instances count failed sign-ins against one shared limit', async () => {
  const username = `victim-${randomBytes(4).toString('hex')}`; // a fresh key: counters outlive test runs
  expect((await signIn(a, username)).status).toBe(401);
  expect((await signIn(b, username)).status).toBe(401);
  expect((await signIn(a, username)).status).toBe(401);
  const blocked = await signIn(b, username);
  expect(blocked.status).toBe(429);
  expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThan(0);
});
