import type { AppContext } from '../../context.js';
import { displayName, type ResolvedClient, toResolved } from './client.js';
import { RateLimiterRes } from 'rate-limiter-flexible';
import { ClientCapacityError, makeRoomForClient } from './capacity.js';
import { CimdError, type CimdPolicy, CimdResolver, looksLikeCimd } from './client-id-metadata-document.js';
import { DEFAULT_PREREGISTERED_FILE, loadPreregisteredClients } from './preregistered.js';

/** A client as the member pages name it. */
export interface ClientDescription {
  name: string;
  host: string | undefined;
  /** Undefined when the client is no longer stored (a pruned registration). */
  kind: ResolvedClient['kind'] | undefined;
}

export class UnknownClientError extends Error {
  override name = 'UnknownClientError';
}

/** The store's cap and the per-address budget for Client ID Metadata Documents (docs/security.md). */
function cimdPolicy(ctx: AppContext): CimdPolicy {
  const { fetchesPerIp, fetchWindowSeconds, maxClients } = ctx.config.oauth.cimd;
  const limiter = ctx.limiters({ keyPrefix: 'cimd-fetch-ip', points: fetchesPerIp, durationSeconds: fetchWindowSeconds });
  return {
    async admitFetch(requester) {
      if (requester === undefined) return;
      try {
        await limiter.consume(requester);
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) throw e;
        throw new CimdError('too many new client metadata documents from your address; retry later');
      }
    },
    async makeRoom() {
      try {
        await makeRoomForClient(ctx.db, ctx.clock, 'cimd', {
          maxClients,
          unusedTtlSeconds: ctx.config.oauth.dcr.unusedTtlSeconds,
        });
      } catch (e) {
        if (!(e instanceof ClientCapacityError)) throw e;
        throw new CimdError('this server cannot take new clients right now; retry later');
      }
    },
  };
}

/** Finds a client by id: pre-registered (data file), dynamically registered (store), or a metadata document URL. */
export class ClientRegistry {
  readonly preregistered: Map<string, ResolvedClient>;
  readonly cimd: CimdResolver;

  constructor(private readonly ctx: AppContext) {
    this.preregistered = loadPreregisteredClients(
      ctx.config.oauth.preregisteredClientsFile ?? DEFAULT_PREREGISTERED_FILE,
    );
    this.cimd = new CimdResolver(ctx.db, ctx.clock, ctx.config, cimdPolicy(ctx));
  }

  /**
   * The client, or throws UnknownClientError (shown as a page: the redirect URI cannot be trusted yet). `requester`,
   * the client address of the request, is charged when a new metadata document has to be fetched.
   */
  async resolve(clientId: string, requester?: string): Promise<ResolvedClient> {
    const pre = this.preregistered.get(clientId);
    if (pre) return pre;
    if (looksLikeCimd(clientId)) {
      try {
        return await this.cimd.resolve(clientId, requester);
      } catch (e) {
        if (e instanceof CimdError) {
          this.ctx.log.info({ client_id: clientId, reason: e.message, detail: e.detail }, 'metadata document refused');
          throw new UnknownClientError(`The client's metadata document cannot be used: ${e.message}.`);
        }
        throw e;
      }
    }
    if (clientId.length <= 200) {
      const row = await this.ctx.db
        .selectFrom('oauth_clients')
        .select(['metadata'])
        .where('client_id', '=', clientId)
        .where('kind', '=', 'dcr')
        .executeTakeFirst();
      if (row) return toResolved(clientId, 'dcr', JSON.parse(row.metadata));
    }
    throw new UnknownClientError('The client_id is not known to this server.');
  }

  /**
   * How the member pages name clients: name and host, by client id, without fetching anything; one query for all the
   * stored ones (a page names up to a few dozen).
   */
  async describeAll(clientIds: Iterable<string>): Promise<Map<string, ClientDescription>> {
    const out = new Map<string, ClientDescription>();
    const stored: string[] = [];
    for (const clientId of new Set(clientIds)) {
      const pre = this.preregistered.get(clientId);
      if (pre) out.set(clientId, { name: pre.name ?? clientId, host: clientHost(pre), kind: 'preregistered' });
      else stored.push(clientId);
    }
    const rows = stored.length
      ? await this.ctx.db
          .selectFrom('oauth_clients')
          .select(['client_id', 'kind', 'metadata'])
          .where('client_id', 'in', stored)
          .execute()
      : [];
    for (const row of rows) {
      const meta = JSON.parse(row.metadata) as { client_name?: string; client_uri?: string };
      const kind = row.kind as ResolvedClient['kind'];
      const host = clientHost({ kind, clientId: row.client_id, clientUri: meta.client_uri });
      const name = meta.client_name === undefined ? row.client_id : displayName(meta.client_name);
      out.set(row.client_id, { name, host, kind });
    }
    // A client no longer stored (a pruned registration) is named by its id.
    for (const clientId of stored) out.set(clientId, out.get(clientId) ?? { name: clientId, host: undefined, kind: undefined });
    return out;
  }

  /** Whether the client has completed a code exchange (a pre-registered client counts as used). */
  async hasBeenUsed(clientId: string): Promise<boolean> {
    if (this.preregistered.has(clientId)) return true;
    const row = await this.ctx.db
      .selectFrom('oauth_clients')
      .select('last_used_at')
      .where('client_id', '=', clientId)
      .executeTakeFirst();
    return row?.last_used_at != null;
  }

  /** Records that a stored client was used, which exempts it from pruning (docs/contract.md#the-oauth-flow). */
  async markUsed(clientId: string): Promise<void> {
    if (this.preregistered.has(clientId)) return;
    await this.ctx.db
      .updateTable('oauth_clients')
      .set({ last_used_at: this.ctx.clock.now() })
      .where('client_id', '=', clientId)
      .execute();
  }
}

/**
 * How far a client's name can be trusted, by its kind: known to the operator, tied to a web address, or self-declared.
 * `word` for a badge (Connected apps), `sentence` where the member decides (consent).
 */
export const CLIENT_TRUST: Record<ResolvedClient['kind'], { word: string; sentence: string }> = {
  preregistered: {
    word: 'Verified',
    sentence: 'Verified: a known application, registered by the operator of this service.',
  },
  cimd: {
    word: 'Identified by its web address',
    sentence: 'Identified by its web address: its name comes from a document published on that site.',
  },
  dcr: {
    word: 'Not verified',
    sentence:
      'Not verified: this application registered itself, so its name is only what it says it is. Check the address you are sent back to.',
  },
};

/** The host a client is known by on the consent page: its metadata URL host, else its client_uri host. */
export function clientHost(client: Pick<ResolvedClient, 'kind' | 'clientId' | 'clientUri'>): string | undefined {
  const source = client.kind === 'cimd' ? client.clientId : client.clientUri;
  return source && URL.canParse(source) ? new URL(source).host : undefined;
}
