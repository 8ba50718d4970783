import type { Kysely } from 'kysely';
import type { Clock } from '../base/clock.js';
import { hashSecret, randomSecret } from '../base/secrets.js';
import type { Database } from '../store/schema.js';
import { createPendingConnection, type NewConnection } from './connections.js';

/** docs/contract.md#limits: authorization codes live 60 seconds and are single use. */
const CODE_TTL_MS = 60_000;

/** A member's consent, bound to the request it answers (RFC 6749 §4.1.2, RFC 7636 §4.4, RFC 8707 §2). */
export interface ConsentedGrant extends Omit<NewConnection, 'pendingUntil'> {
  redirectUri: string;
  codeChallenge: string;
}

/**
 * Records a consent and issues the authorization code that carries it: a pending connection (it becomes the app's
 * connection when the code is exchanged, and dies with the code otherwise) and the code's hash (never the code), in one
 * transaction. The history records the connection when the code is exchanged (`activateGrant`), not here: a consent
 * whose code is never exchanged connects nothing. Returns the code.
 */
export async function issueAuthorizationCode(
  db: Kysely<Database>,
  clock: Clock,
  grant: ConsentedGrant,
): Promise<string> {
  const code = randomSecret();
  const now = clock.now();
  await db.transaction().execute(async (trx) => {
    const connection = await createPendingConnection(trx, clock, {
      ...grant,
      pendingUntil: now + CODE_TTL_MS,
    });
    await trx
      .insertInto('authorization_codes')
      .values({
        hash: hashSecret(code),
        connection_id: connection.id,
        client_id: grant.clientId,
        user_id: grant.userId,
        redirect_uri: grant.redirectUri,
        code_challenge: grant.codeChallenge,
        resource: grant.resource,
        scope: grant.scopes.join(' '),
        created_at: now,
        expires_at: now + CODE_TTL_MS,
        consumed_at: null,
      })
      .execute();
  });
  return code;
}
