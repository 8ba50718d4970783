import { RateLimiterRes } from 'rate-limiter-flexible';
import type { AppContext } from '../context.js';
import { authenticate, canonicalUsername, type UserRow } from '../domain/users.js';
import { retryAfterSeconds } from '../http/rate-limit.js';

export type SignInOutcome =
  | { ok: true; user: UserRow }
  | { ok: false; reason: 'invalid_credentials' }
  | { ok: false; reason: 'rate_limited'; retryAfterSeconds: number };

/** `client`: the client's network as the limits count it (http/server.ts, `clientNetwork`). */
export type SignInGuard = (client: string, username: string, password: string) => Promise<SignInOutcome>;

/**
 * A username's budget across all addresses, as a multiple of the per-address budget: it caps a guesser spread over
 * many addresses, and locking a member out this way takes failures from at least this many addresses.
 */
export const USERNAME_BUDGET_FACTOR = 10;

const GUARDS = new WeakMap<AppContext, SignInGuard>();

/**
 * Password sign-in with its rate limits (docs/security.md#limits-and-their-defaults), one per process and shared by the session API and
 * the sign-in page, so the two count against one budget:
 * - attempts per client address (`SIGNIN_LIMIT_PER_IP`);
 * - password checks per username and address (`SIGNIN_LIMIT_PER_USERNAME`): a guesser gets that many guesses per
 *   window, and ten wrong passwords from one address do not lock the member out from their own;
 * - password checks per username over all addresses (that budget × USERNAME_BUDGET_FACTOR), against spread guessing.
 * Each check is paid for before the password is checked, atomically in the limiter's store, so concurrent attempts
 * cannot all read "not yet limited" and then all be checked. A success refunds its own payment and clears the
 * address's failures.
 */
export function signInGuard(ctx: AppContext): SignInGuard {
  let guard = GUARDS.get(ctx);
  if (!guard) {
    guard = buildGuard(ctx);
    GUARDS.set(ctx, guard);
  }
  return guard;
}

function buildGuard(ctx: AppContext): SignInGuard {
  const { perUsername, perIp, windowSeconds } = ctx.config.signinLimit;
  const limiter = (keyPrefix: string, points: number) =>
    ctx.limiters({ keyPrefix, points, durationSeconds: windowSeconds });
  const byIp = limiter('signin-ip', perIp);
  const byUserAndIp = limiter('signin-user-ip', perUsername);
  const byUser = limiter('signin-user-all', perUsername * USERNAME_BUDGET_FACTOR);

  return async (client, typed, password) => {
    // Canonical before any limit counts it: "Ada" and "ada " are ada's attempts, on ada's budget.
    const username = canonicalUsername(typed);
    const userAndIp = JSON.stringify([username, client]);
    try {
      await byIp.consume(client);
      await byUserAndIp.consume(userAndIp);
      await byUser.consume(username);
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      return { ok: false, reason: 'rate_limited', retryAfterSeconds: retryAfterSeconds(e) };
    }
    const user = await authenticate(ctx.db, username, password);
    if (!user) return { ok: false, reason: 'invalid_credentials' };
    await Promise.all([byUserAndIp.delete(userAndIp), byUser.reward(username, 1)]);
    return { ok: true, user };
  };
}
