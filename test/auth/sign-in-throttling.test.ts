import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from '../../src/domain/users.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { Browser } from './oauth-helpers.js';

/**
 * Sign-in throttling against the attacks a red team tried: a targeted lockout of a member, a burst that races the
 * counter, and two sign-in routes with two budgets. Addresses are told apart by X-Forwarded-For (TRUST_PROXY=on, as
 * behind the operator's proxy).
 */

const LIMIT = 10;
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    env: { TRUST_PROXY: 'on', SIGNIN_LIMIT_PER_USERNAME: String(LIMIT), SIGNIN_LIMIT_PER_IP: '1000' },
  });
});
afterAll(() => server?.close());

async function member(at: TestServer): Promise<{ username: string; password: string }> {
  const username = `m${randomBytes(5).toString('hex')}`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  await createUser(at.services.ctx.db, at.clock, { username, password });
  return { username, password };
}

const attempt = (at: TestServer, from: string, username: string, password: string) =>
  fetch(`${at.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
    body: JSON.stringify({ username, password }),
  });

describe(`targeted lockout (${ENGINE})`, () => {
  it('ten wrong passwords from an attacker do not refuse the member their right password from their own address', async () => {
    const { username, password } = await member(server);
    for (let i = 0; i < LIMIT; i++)
      expect((await attempt(server, '198.51.100.7', username, 'wrong')).status).toBe(401);
    // The attacker's address is spent for this username…
    expect((await attempt(server, '198.51.100.7', username, password)).status).toBe(429);
    // …the member, elsewhere, signs in.
    expect((await attempt(server, '203.0.113.20', username, password)).status).toBe(201);
  });
  it('a guesser spread over many addresses is capped by the username budget over all addresses', async () => {
    const { username } = await member(server);
    const statuses: number[] = [];
    for (let a = 0; a < 12; a++) {
      for (let i = 0; i < LIMIT; i++)
        statuses.push((await attempt(server, `192.0.2.${a}`, username, 'wrong')).status);
    }
    // 10 addresses × 10 guesses = the cap (LIMIT × 10); everything after it is refused unchecked.
    expect(statuses.filter((s) => s === 401)).toHaveLength(LIMIT * 10);
    expect(statuses.slice(LIMIT * 10).every((s) => s === 429)).toBe(true);
  });
});

describe(`the sign-in limit under concurrency (${ENGINE})`, () => {
  it('59 wrong passwords and the right one at once: at most the limit are checked, the rest refused', async () => {
    const { username, password } = await member(server);
    const burst = [...Array.from({ length: 59 }, () => 'wrong'), password];
    const statuses = await Promise.all(
      burst.map((p) => attempt(server, '198.51.100.99', username, p).then((r) => r.status)),
    );
    // Checked: a 401 (wrong) or a 201 (right); refused unchecked: 429.
    expect(statuses.filter((s) => s !== 429).length).toBeLessThanOrEqual(LIMIT);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(60 - LIMIT);
  });
});

describe(`one budget for the sign-in page and the session API (${ENGINE})`, () => {
  it('in memory mode, failures on the page and on the API count together', async () => {
    const small = await startTestServer({ env: { SIGNIN_LIMIT_PER_USERNAME: '2' } });
    try {
      const { username, password } = await member(small);
      expect((await attempt(small, 'x', username, 'wrong')).status).toBe(401);
      const page = new Browser(small.url.auth);
      await page.get('/sign-in');
      const form = await page.post('/sign-in', {
        csrf: page.csrf,
        username,
        password: 'wrong',
        next: '/dashboard',
      });
      expect(form.status).toBe(401);
      expect((await attempt(small, 'x', username, password)).status).toBe(429);
    } finally {
      await small.close();
    }
  });
  it('with Redis, across two instances, the burst still checks at most the limit', async () => {
    const env = { REDIS_URL, TRUST_PROXY: 'on', SIGNIN_LIMIT_PER_USERNAME: String(LIMIT) };
    const a = await startTestServer({ env });
    const b = await startTestServer({ env, sharing: a });
    try {
      const { username, password } = await member(a);
      const burst = [...Array.from({ length: 39 }, () => 'wrong'), password];
      const statuses = await Promise.all(
        burst.map((p, i) => attempt(i % 2 ? a : b, '198.51.100.5', username, p).then((r) => r.status)),
      );
      expect(statuses.filter((s) => s !== 429).length).toBeLessThanOrEqual(LIMIT);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
