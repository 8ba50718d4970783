import type { FastifyBaseLogger } from 'fastify';
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { AppContext } from '../context.js';
import { canonicalUsername, checkPassword, findUserByUsername, type UserRow } from '../domain/users.js';
import { retryAfterSeconds } from '../http/rate-limit.js';

export type SignInOutcome =
  | { ok: true; user: UserRow }
  | { ok: false; reason: 'invalid_credentials' }
  | { ok: false; reason: 'rate_limited'; retryAfterSeconds: number };

/**
 * `client`: the client's network as the limits count it (http/server.ts, `clientNetwork`); `log`: the request's, which
 * gets a line for each refused password and for each limit an attempt first goes past.
 */
export type SignInGuard = (
  client: string,
  username: string,
  password: string,
  log: FastifyBaseLogger,
) => Promise<SignInOutcome>;

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
 *
 * What an operator facing password guessing needs is logged, and never what was typed: the access log has neither the
 * address nor the name, and a password typed into the username field must not reach a log. A refused password is an
 * `info` line with the client's network and, when the username names a user, that user's id; the attempt that first
 * goes past a limit is one `warn` line per limit, key and window (the store counts every attempt, so exactly one
 * attempt sees the limit plus one), not one per refused attempt, which a flood would turn into a flood of lines.
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
  const limit = (name: string, points: number) => ({
    name,
    points,
    limiter: ctx.limiters({ keyPrefix: name, points, durationSeconds: windowSeconds }),
  });
  const byIp = limit('signin-ip', perIp);
  const byUserAndIp = limit('signin-user-ip', perUsername);
  const byUser = limit('signin-user-all', perUsername * USERNAME_BUDGET_FACTOR);

  return async (client, typed, password, log) => {
    // Canonical before any limit counts it: "Ada" and "ada " are ada's attempts, on ada's budget.
    const username = canonicalUsername(typed);
    const userAndIp = JSON.stringify([username, client]);
    for (const [{ name, points, limiter }, key] of [
      [byIp, client],
      [byUserAndIp, userAndIp],
      [byUser, username],
    ] as const) {
      try {
        await limiter.consume(key);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        const retryAfter = retryAfterSeconds(e);
        if (e.consumedPoints === points + 1) {
          const userId = name === 'signin-ip' ? undefined : (await findUserByUsername(ctx.db, username))?.id;
          log.warn(
            { limit: name, client, user_id: userId, retry_after_seconds: retryAfter },
            'sign-in limit reached: attempts refused until its window ends',
          );
        }
        return { ok: false, reason: 'rate_limited', retryAfterSeconds: retryAfter };
      }
    }
    const checked = await checkPassword(ctx.db, username, password);
    if (!checked.user) {
      if (checked.known) log.info({ client, user_id: checked.known.id }, 'sign-in refused: wrong password');
      else log.info({ client }, 'sign-in refused: no user by that name');
      return { ok: false, reason: 'invalid_credentials' };
    }
    await Promise.all([byUserAndIp.limiter.delete(userAndIp), byUser.limiter.reward(username, 1)]);
    return { ok: true, user: checked.user };
  };
}
