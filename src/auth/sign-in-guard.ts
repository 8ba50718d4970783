import { RateLimiterRes } from 'rate-limiter-flexible';
import type { AppContext } from '../context.js';
import { authenticate, type UserRow } from '../domain/users.js';
import { retryAfterSeconds } from '../http/rate-limit.js';

export type SignInOutcome =
  | { ok: true; user: UserRow }
  | { ok: false; reason: 'invalid_credentials' }
  | { ok: false; reason: 'rate_limited'; retryAfterSeconds: number };

/**
 * Password sign-in with its rate limits, shared by the session API and the sign-in page (they share the counters):
 * attempts per client address, and failures per username. A username over its failures is refused before the
 * password is even checked, so nothing can be guessed while it is blocked; a success clears its failures.
 */
export function signInGuard(
  ctx: AppContext,
): (ip: string, username: string, password: string) => Promise<SignInOutcome> {
  const { perUsername, perIp, windowSeconds } = ctx.config.signinLimit;
  const byIp = ctx.limiters({ keyPrefix: 'signin-ip', points: perIp, durationSeconds: windowSeconds });
  const failures = ctx.limiters({
    keyPrefix: 'signin-user',
    points: perUsername,
    durationSeconds: windowSeconds,
  });

  return async (ip, username, password) => {
    try {
      await byIp.consume(ip);
      const spent = await failures.get(username);
      if (spent && spent.remainingPoints <= 0) await failures.consume(username);
      const user = await authenticate(ctx.db, username, password);
      if (!user) {
        await failures.consume(username);
        return { ok: false, reason: 'invalid_credentials' };
      }
      await failures.delete(username);
      return { ok: true, user };
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      return { ok: false, reason: 'rate_limited', retryAfterSeconds: retryAfterSeconds(e) };
    }
  };
}
