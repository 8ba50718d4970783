import type { AppContext } from '../context.js';
import { renderUser } from '../domain/resources.js';
import type { UserRow } from '../domain/users.js';
import type { TokenKind } from '../tokens/verifier.js';

/** The token kinds `GET /me` accepts, and the scope an OAuth token needs for it (docs/contract.md#authentication). */
export const ME_ACCEPTS: readonly TokenKind[] = ['session', 'oauth'];
export const ME_SCOPE = 'user:read';

/** The body of `GET /me` in `version`: the user in the latest shape, walked back through the change modules. */
export function meBody(ctx: Pick<AppContext, 'versions'>, user: UserRow, version: string) {
  return ctx.versions.render('user', renderUser(user), version);
}
