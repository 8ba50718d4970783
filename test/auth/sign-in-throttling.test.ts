import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createUser } from '../../src/domain/users.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { Browser } from './oauth-helpers.js';

/**
 * Sign-in throttling against the attacks a red team tried: a targeted lockout of a member, a burst that races the
 * counter, and two sign-in routes with two budgets. Addresses are told apart by X-Forwarded-For (TRUST_PROXY=loopback:
 * the test's client is the operator's proxy).
 */

const LIMIT = 10;
const REDIS_URL = process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({
    env: { TRUST_PROXY: 'loopback', SIGNIN_LIMIT_PER_USERNAME: String(LIMIT), SIGNIN_LIMIT_PER_IP: '1000' },
  });
});
afterAll(() => server?.close());

async function member(at: TestServer): Promise<{ username: string; password: string; id: string }> {
  const username = `m${randomBytes(5).toString('hex')}`;
  const password = `pw-${randomBytes(8).toString('hex')}`;
  const { id } = await createUser(at.services.ctx.db, at.clock, { username, password });
  return { username, password, id };
}

const attempt = (at: TestServer, forwardedFor: string, username: string, password: string) =>
  fetch(`${at.url.auth}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': forwardedFor },
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
    const env = { REDIS_URL, TRUST_PROXY: 'loopback', SIGNIN_LIMIT_PER_USERNAME: String(LIMIT) };
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

describe(`the client address behind the operator's proxies (${ENGINE})`, () => {
  const LIMIT_PER_IP = 5;
  const spoofed = () =>
    `203.0.113.${Math.floor(Math.random() * 250)}, 192.0.2.${Math.floor(Math.random() * 250)}`;

  /** Attempts with a fresh first entries each time, as a client writes its own header before the proxy appends. */
  async function statusesFrom(at: TestServer, appendedByProxy: string | undefined): Promise<number[]> {
    const statuses: number[] = [];
    for (let i = 0; i <= LIMIT_PER_IP; i++) {
      const header = appendedByProxy ? `${spoofed()}, ${appendedByProxy}` : spoofed();
      statuses.push((await attempt(at, header, `nobody${i}`, 'wrong')).status);
    }
    return statuses;
  }

  it("entries a client wrote before the proxy's own do not give it a fresh address per attempt", async () => {
    // Before, TRUST_PROXY=on took the header's first entry: every attempt below came from a new address.
    const behind = await startTestServer({
      env: { TRUST_PROXY: '10.9.0.0/16, loopback', SIGNIN_LIMIT_PER_IP: String(LIMIT_PER_IP) },
    });
    try {
      // The load balancer (loopback) appended the client's address, 198.51.100.40.
      expect(await statusesFrom(behind, '198.51.100.40')).toEqual([...Array(LIMIT_PER_IP).fill(401), 429]);
      // Behind two proxies of the list (10.9.0.7 appended by the second), still the client's.
      expect(await statusesFrom(behind, '198.51.100.41, 10.9.0.7')).toEqual([
        ...Array(LIMIT_PER_IP).fill(401),
        429,
      ]);
      // A proxy that writes the client's port beside its address: one client, whatever port it came from.
      const withPorts: number[] = [];
      for (let port = 40_000; port <= 40_000 + LIMIT_PER_IP; port++)
        withPorts.push((await attempt(behind, `198.51.100.43:${port}`, `nobody${port}`, 'wrong')).status);
      expect(withPorts).toEqual([...Array(LIMIT_PER_IP).fill(401), 429]);
      // An IPv6 client can take any address of its /64: one budget for them all; another /64 has its own.
      const fromOneNetwork: number[] = [];
      for (let i = 1; i <= LIMIT_PER_IP + 1; i++)
        fromOneNetwork.push(
          (await attempt(behind, `2001:db8:0:7::${i.toString(16)}`, `v6${i}`, 'wrong')).status,
        );
      expect(fromOneNetwork).toEqual([...Array(LIMIT_PER_IP).fill(401), 429]);
      expect((await attempt(behind, '2001:db8:0:8::1', 'v6', 'wrong')).status).toBe(401);
      // Another client behind the same proxy has its own budget.
      expect((await attempt(behind, '198.51.100.42', 'nobody', 'wrong')).status).toBe(401);
    } finally {
      await behind.close();
    }
  });

  it('a peer that is not one of the proxies is the client, whatever X-Forwarded-For it sends', async () => {
    const elsewhere = await startTestServer({
      env: { TRUST_PROXY: '192.0.2.1', SIGNIN_LIMIT_PER_IP: String(LIMIT_PER_IP) },
    });
    try {
      expect(await statusesFrom(elsewhere, undefined)).toEqual([...Array(LIMIT_PER_IP).fill(401), 429]);
    } finally {
      await elsewhere.close();
    }
  });
});

describe(`what the log says of password guessing (${ENGINE})`, () => {
  /** The log lines of this file's server whose message starts with `msg`. */
  const lines = (msg: string) =>
    server.logs.lines.filter((l) => typeof l['msg'] === 'string' && l['msg'].startsWith(msg));

  it('each refused password, with the network and the user it names, never what was typed', async () => {
    const { username, id } = await member(server);
    const before = lines('sign-in refused').length;
    expect((await attempt(server, '198.51.100.31', username, 'a-guessed-password')).status).toBe(401);
    // A password typed into the username field: refused, and it never reaches the log.
    expect((await attempt(server, '198.51.100.31', 'my-Secret-Passw0rd', 'x')).status).toBe(401);
    expect(lines('sign-in refused').slice(before)).toEqual([
      expect.objectContaining({
        level: 30,
        client: '198.51.100.31',
        user_id: id,
        msg: 'sign-in refused: wrong password',
      }),
      expect.objectContaining({
        level: 30,
        client: '198.51.100.31',
        msg: 'sign-in refused: no user by that name',
      }),
    ]);
    const logged = JSON.stringify(server.logs.lines);
    for (const typed of ['a-guessed-password', 'my-secret-passw0rd', 'my-Secret-Passw0rd'])
      expect(logged).not.toContain(typed);
  });

  it('a limit reached is one warning per limit, key and window, however many attempts it refuses', async () => {
    const { username, password, id } = await member(server);
    const before = lines('sign-in limit reached').length;
    for (let i = 0; i < LIMIT; i++) await attempt(server, '198.51.100.32', username, 'wrong');
    for (let i = 0; i < 5; i++)
      expect((await attempt(server, '198.51.100.32', username, password)).status).toBe(429);
    expect(lines('sign-in limit reached').slice(before)).toEqual([
      expect.objectContaining({
        level: 40,
        limit: 'signin-user-ip',
        client: '198.51.100.32',
        user_id: id,
        retry_after_seconds: expect.any(Number),
      }),
    ]);
  });
});
