import { createHash } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { RateLimiterRes } from 'rate-limiter-flexible';
import type { AppContext } from '../../context.js';
import { toEpochSeconds } from '../../base/clock.js';
import { retryAfterSeconds } from '../../http/rate-limit.js';
import { OAuthError } from '../../http/oauth-errors.js';
import { clientNetwork } from '../../http/server.js';
import { ClientCapacityError, makeRoomForClient } from './capacity.js';
import { checkClientMetadata } from './client.js';

/**
 * Dynamic client registration (RFC 7591) at POST /oauth/register: public clients only, `application_type` honoured,
 * idempotent (the same metadata gives the same client_id), rate limited per address, and capped with pruning of
 * clients that were never used.
 */
export async function registrationRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  const { dcr } = ctx.config.oauth;
  const limiter = ctx.limiters({
    keyPrefix: 'dcr-ip',
    points: dcr.perIp,
    durationSeconds: dcr.windowSeconds,
  });

  // Under the OAuth scope's prefix, /oauth (auth/plugin.ts).
  app.post('/register', async (request, reply) => {
    try {
      await limiter.consume(clientNetwork(request));
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) throw e;
      throw new OAuthError('rate_limited', 'Too many registrations from this address; retry later', 429, {
        'retry-after': String(retryAfterSeconds(e)),
      });
    }
    if (typeof request.body !== 'object' || request.body === null || Array.isArray(request.body)) {
      throw new OAuthError('invalid_client_metadata', 'Send the client metadata as a JSON object');
    }
    const checked = checkClientMetadata(request.body);
    if (!checked.ok) throw new OAuthError(checked.error, checked.description);
    const metadata = checked.metadata;
    const canonical = canonicalJson(metadata);
    // Idempotent: the id is a digest of the normalised metadata, so a client that registers again gets the same id.
    const clientId = `dcr_${createHash('sha256').update(canonical).digest('base64url').slice(0, 32)}`;
    const now = ctx.clock.now();
    let row = await ctx.db
      .selectFrom('oauth_clients')
      .select(['client_id', 'created_at'])
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    if (!row) {
      await makeRoom(ctx);
      await ctx.db
        .insertInto('oauth_clients')
        .values({
          client_id: clientId,
          kind: 'dcr',
          metadata: canonical,
          api_version: null,
          created_at: now,
          last_used_at: null,
        })
        .onConflict((oc) => oc.column('client_id').doNothing())
        .execute();
      row = { client_id: clientId, created_at: now };
      request.log.info({ client_id: clientId }, 'client registered');
    }
    // RFC 7591 §3.2.1: the client information response echoes the registered metadata.
    return reply
      .code(201)
      .header('cache-control', 'no-store')
      .send({ client_id: clientId, client_id_issued_at: toEpochSeconds(row.created_at), ...metadata });
  });
}

/** Room for one more registration, or 503 when the cap is reached and nothing can be pruned. */
async function makeRoom(ctx: AppContext): Promise<void> {
  try {
    await makeRoomForClient(ctx.db, ctx.clock, 'dcr', ctx.config.oauth.dcr);
  } catch (e) {
    if (!(e instanceof ClientCapacityError)) throw e;
    throw new OAuthError('temporarily_unavailable', 'The registration capacity is used up; retry later', 503, {
      'retry-after': '3600',
    });
  }
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}
