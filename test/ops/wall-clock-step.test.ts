import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/base/clock.js';
import { KEY_REFRESH_INTERVAL_MS, SigningKeys } from '../../src/tokens/signing-keys.js';
import { MAX_CLOCK_SKEW_MS } from '../../src/tokens/verifier.js';
import { logged } from '../helpers/ops.js';
import { ENGINE, signIn, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * Clocks as the field has them: instances whose clocks differ by a second or two, and a wall clock set back under a
 * running instance (NTP stepping it after boot, a virtual machine restored from a snapshot, an operator's `date -s`).
 * The bounds the README states are durations and hold whatever the wall clock says; a token another instance signed a
 * moment "later" is good here; and a clock so far behind that tokens are refused is logged, not left to 401s alone.
 */

const HOUR_MS = 3_600_000;
const CLOCK_BEHIND = "clock behind the tokens' issuer: tokens refused until it catches up";
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

const me = (token: string) =>
  fetch(`${server.url.api}/me`, { headers: { authorization: `Bearer ${token}` } });
const errorCode = async (res: Response) => ((await res.json()) as { error: { code: string } }).error.code;

describe(`clocks (${ENGINE})`, () => {
  it('a token signed on an instance whose clock is two seconds ahead is good here at once', async () => {
    server.clock.step(2000);
    const ahead = await signIn(server, 'ada');
    server.clock.step(-2000);
    const res = await me(ahead.token);
    expect(res.status).toBe(200);
  });

  it('the wall clock set back half a minute: a session revoked on another instance is refused within LIVENESS_CACHE_SECONDS', async () => {
    const session = await signIn(server, 'ada');
    expect((await me(session.token)).status).toBe(200);
    // Another instance ends the session: straight in the shared database, this instance's cache is not told.
    await server.services.ctx.db
      .updateTable('sessions')
      .set({ revoked_at: server.clock.now() })
      .where('id', '=', session.id)
      .execute();
    server.clock.step(-30_000);
    server.clock.advance(server.config.livenessCacheSeconds * 1000 + 1);
    const res = await me(session.token);
    expect(res.status).toBe(401);
    expect(await errorCode(res)).toBe('token_revoked');
  });

  it('the wall clock set back an hour: a key rotated on another instance is published here within the key-pickup bound', async () => {
    await server.services.ctx.keys.jwks();
    const elsewhere = new SigningKeys(
      server.services.ctx.db,
      new ManualClock(server.clock.now()),
      server.config.signingAlg,
      server.config.sessionTtlSeconds * 1000,
    );
    await elsewhere.init();
    const kid = await elsewhere.rotate();
    server.clock.step(-HOUR_MS);
    try {
      server.clock.advance(KEY_REFRESH_INTERVAL_MS + 1);
      const published = (await server.services.ctx.keys.jwks()).keys.map((k) => k.kid);
      expect(published).toContain(kid);
    } finally {
      server.clock.step(HOUR_MS);
    }
  });

  it('a clock further behind than the allowed skew: tokens are refused, and the log says why, once', async () => {
    const session = await signIn(server, 'grace');
    const before = logged(server.logs, CLOCK_BEHIND);
    server.clock.step(-(MAX_CLOCK_SKEW_MS + 60_000));
    try {
      for (let i = 0; i < 3; i++) {
        const res = await me(session.token);
        expect(res.status).toBe(401);
        expect(await errorCode(res)).toBe('invalid_token');
      }
      const warnings = logged(server.logs, CLOCK_BEHIND);
      expect(warnings.length - before.length).toBe(1);
      expect(warnings.at(-1)).toMatchObject({ level: 40, allowed_ms: MAX_CLOCK_SKEW_MS });
      // Read from the token's seconds: within a second of the step.
      expect(warnings.at(-1)!['ahead_ms']).toBeGreaterThan(MAX_CLOCK_SKEW_MS + 59_000);
    } finally {
      server.clock.step(MAX_CLOCK_SKEW_MS + 60_000);
    }
    expect((await me(session.token)).status).toBe(200);
  });
});
