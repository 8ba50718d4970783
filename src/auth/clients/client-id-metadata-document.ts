import { Buffer } from 'node:buffer';
import { readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { rootCertificates } from 'node:tls';
import type { Kysely } from 'kysely';
import type { Config } from '../../config/config.js';
import type { Clock } from '../../base/clock.js';
import type { Database } from '../../store/schema.js';
import { Lru } from '../../base/lru.js';
import { checkClientMetadata, type ResolvedClient, toResolved } from './client.js';
import { hostLookup } from './host-lookup.js';
import { isSpecialUse } from './special-use.js';

/**
 * Client ID Metadata Documents (draft-ietf-oauth-client-id-metadata-document; docs/contract.md#the-oauth-flow): the client_id is an https
 * URL serving the client's metadata. Every rule here is a defence of the server that fetches it:
 *  - https, no fragment, no userinfo, no dot segments, a path;
 *  - GET without following redirects; only a 200 counts; at most 5 KiB; about 3 s in all;
 *  - never from a special-use address, judged on the CONNECTED socket (and on the DNS answer, before connecting);
 *  - cached by HTTP headers clamped to 30 s .. 1 day; concurrent fetches of one URL coalesce;
 *  - the resolved document is stored, so the token endpoint never fetches.
 */

export const CIMD_MAX_BYTES = 5 * 1024;
export const CIMD_MIN_CACHE_MS = 30_000;
export const CIMD_MAX_CACHE_MS = 24 * 3600 * 1000;

/**
 * Why a metadata document cannot be used. `message` is what the client is told; `detail`, for the log only, is the
 * network's own account (connection refused, TLS, DNS, timeout), which told to anyone would make the server a port
 * scanner and a DNS oracle for them.
 */
export class CimdError extends Error {
  override name = 'CimdError';
  constructor(
    message: string,
    readonly detail?: string,
  ) {
    super(message);
  }
}

/** The one thing a client learns when the network fetch of its document fails, whatever the cause. */
export const CIMD_UNREACHABLE = 'the metadata document could not be fetched from its URL';

/** What the resolver needs besides the fetch itself: room in the store, and the per-address fetch budget. */
export interface CimdPolicy {
  /** Called before a new document's first fetch for a requester; throws CimdError when the address is over budget. */
  admitFetch(requester: string | undefined): Promise<void>;
  /** Called before a document not stored yet is stored; throws CimdError when the store is full. */
  makeRoom(): Promise<void>;
}

export const looksLikeCimd = (clientId: string): boolean => /^https:\/\//i.test(clientId);

/** Why a client id URL cannot be a metadata document URL, or undefined. */
export function cimdUrlProblem(clientId: string): string | undefined {
  if (!URL.canParse(clientId)) return 'the client_id is not a URL';
  const u = new URL(clientId);
  if (u.protocol !== 'https:') return 'the client_id URL must use https';
  if (clientId.includes('#')) return 'the client_id URL must not contain a fragment';
  if (u.username || u.password) return 'the client_id URL must not contain user information';
  const rawPath = clientId.replace(/^https:\/\/[^/?#]*/i, '').split(/[?#]/)[0] ?? '';
  if (rawPath === '' || rawPath === '/') return 'the client_id URL must have a path';
  if (rawPath.split('/').some((s) => /^(\.|%2e){1,2}$/i.test(s))) {
    return 'the client_id URL must not contain . or .. path segments';
  }
  if (clientId.length > 2000) return 'the client_id URL is too long';
  return undefined;
}

/**
 * A document this process read, trusted until `trustedUntil` on the monotonic clock: for the lifetime it had left when
 * it was read (the stored expiry is on the wall clock, shared by every instance). Measured on the wall clock, a clock
 * set back an hour kept a refused document refused for that hour instead of 30 s.
 */
interface Fetched {
  client: ResolvedClient;
  trustedUntil: number;
}

export class CimdResolver {
  private readonly memory = new Lru<string, Fetched>(1000);
  private readonly inFlight = new Map<string, Promise<ResolvedClient>>();
  /** Refused documents, remembered for the cache floor: a bad client_id costs one fetch per 30 s, not one per request. */
  private readonly refused = new Lru<string, { error: CimdError; trustedUntil: number }>(1000);
  private readonly ca: string[] | undefined;

  /** Network fetches under way now (coalesced fetches of one URL count once), capped by CIMD_MAX_CONCURRENT_FETCHES. */
  private fetching = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly config: Config,
    private readonly policy: CimdPolicy = { admitFetch: async () => {}, makeRoom: async () => {} },
  ) {
    const caFile = config.oauth.cimd.testCaFile;
    this.ca = caFile ? [...rootCertificates, readFileSync(caFile, 'utf8')] : undefined;
  }

  /** Number of network fetches made (tests check caching and coalescing). */
  fetches = 0;

  async resolve(clientId: string, requester?: string): Promise<ResolvedClient> {
    const problem = cimdUrlProblem(clientId);
    if (problem) throw new CimdError(problem);
    const now = this.clock.now();
    const monotonicNow = this.clock.monotonic();
    const cached = this.memory.get(clientId);
    if (cached && cached.trustedUntil > monotonicNow) return cached.client;
    const refused = this.refused.get(clientId);
    if (refused && refused.trustedUntil > monotonicNow) throw refused.error;
    const stored = await this.db
      .selectFrom('oauth_clients')
      .select(['metadata', 'metadata_expires_at'])
      .where('client_id', '=', clientId)
      .where('kind', '=', 'cimd')
      .executeTakeFirst();
    if (stored?.metadata_expires_at && stored.metadata_expires_at > now) {
      const client = toResolved(clientId, 'cimd', JSON.parse(stored.metadata));
      this.remember(clientId, client, stored.metadata_expires_at - now);
      return client;
    }
    let pending = this.inFlight.get(clientId);
    if (!pending) {
      await this.policy.admitFetch(requester);
      if (this.fetching >= this.config.oauth.cimd.maxConcurrentFetches) {
        throw new CimdError('too many client metadata documents are being fetched right now; retry shortly');
      }
      this.fetching++;
      pending = this.fetchAndStore(clientId, stored !== undefined)
        .catch((e: unknown) => {
          if (e instanceof CimdError) {
            this.refused.set(clientId, { error: e, trustedUntil: this.clock.monotonic() + CIMD_MIN_CACHE_MS });
          }
          throw e;
        })
        .finally(() => {
          this.fetching--;
          this.inFlight.delete(clientId);
        });
      this.inFlight.set(clientId, pending);
    }
    return pending;
  }

  private async fetchAndStore(clientId: string, alreadyStored: boolean): Promise<ResolvedClient> {
    this.fetches++;
    const { body, maxAgeMs } = await this.fetchDocument(clientId);
    let json: unknown;
    try {
      json = JSON.parse(body);
    } catch {
      throw new CimdError('the metadata document is not JSON');
    }
    if (typeof json !== 'object' || json === null || Array.isArray(json)) {
      throw new CimdError('the metadata document is not a JSON object');
    }
    const doc = json as Record<string, unknown>;
    if (doc['client_id'] !== clientId) {
      throw new CimdError("the metadata document's client_id does not equal its URL");
    }
    if ('client_secret' in doc) throw new CimdError('a metadata document must not contain a client_secret');
    const { client_id: _ignored, ...rest } = doc;
    const checked = checkClientMetadata(rest, { verifiedHost: new URL(clientId).hostname });
    if (!checked.ok) throw new CimdError(`the metadata document is invalid: ${checked.description}`);
    const now = this.clock.now();
    const lifetimeMs = Math.min(CIMD_MAX_CACHE_MS, Math.max(CIMD_MIN_CACHE_MS, maxAgeMs));
    const expiresAt = now + lifetimeMs;
    const metadata = JSON.stringify(checked.metadata);
    if (!alreadyStored) await this.policy.makeRoom();
    await this.db
      .insertInto('oauth_clients')
      .values({
        client_id: clientId,
        kind: 'cimd',
        metadata,
        api_version: null,
        created_at: now,
        last_used_at: null,
        metadata_expires_at: expiresAt,
      })
      .onConflict((oc) => oc.column('client_id').doUpdateSet({ metadata, metadata_expires_at: expiresAt }))
      .execute();
    const client = toResolved(clientId, 'cimd', checked.metadata);
    this.remember(clientId, client, lifetimeMs);
    return client;
  }

  private remember(clientId: string, client: ResolvedClient, lifetimeMs: number): void {
    this.memory.set(clientId, { client, trustedUntil: this.clock.monotonic() + lifetimeMs });
  }

  private fetchDocument(url: string): Promise<{ body: string; maxAgeMs: number }> {
    const allowLoopback = this.config.oauth.cimd.testAllowLoopback;
    const u = new URL(url);
    const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
    if (isIP(host) && isSpecialUse(host, allowLoopback)) {
      return Promise.reject(new CimdError(CIMD_UNREACHABLE, 'the client_id host is a special-use address'));
    }
    // Special-use answers are refused before connecting; the connected socket is checked again below. The name is
    // resolved off libuv's thread pool, and its queries end with the fetch (host-lookup.ts).
    const { lookup, cancel } = hostLookup({
      timeoutMs: this.config.oauth.cimd.fetchTimeoutMs,
      servers: this.config.oauth.cimd.testDnsServers,
      keep: (address) => !isSpecialUse(address, allowLoopback),
      refused: () => new CimdError(CIMD_UNREACHABLE, 'the host resolves to a special-use address'),
    });
    return new Promise((resolve, reject) => {
      let settled = false;
      const fail = (message: string, detail?: string) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        cancel();
        req.destroy();
        reject(new CimdError(message, detail));
      };
      const unreachable = (detail: string) => fail(CIMD_UNREACHABLE, detail);
      const req = httpsRequest(url, {
        method: 'GET',
        headers: { accept: 'application/json', 'user-agent': 'svc-agent-access (client metadata fetch)' },
        lookup,
        agent: false,
        ...(this.ca ? { ca: this.ca } : {}),
      });
      const timer = setTimeout(
        () => unreachable('timed out'),
        this.config.oauth.cimd.fetchTimeoutMs,
      );
      req.on('socket', (socket: Socket) => {
        const check = () => {
          const addr = socket.remoteAddress;
          if (!addr || isSpecialUse(addr, allowLoopback)) unreachable(`connected to special-use address ${addr}`);
        };
        if (socket.connecting) socket.once('connect', check);
        else check();
      });
      req.on('error', (e) => unreachable(e instanceof CimdError ? (e.detail ?? e.message) : e.message));
      req.on('response', (res) => {
        if (res.statusCode !== 200) {
          res.resume();
          const why =
            res.statusCode && res.statusCode >= 300 && res.statusCode < 400
              ? 'the metadata document URL redirects; redirects are not followed'
              : `the metadata document URL answered ${res.statusCode}, not 200`;
          return fail(why);
        }
        const declared = Number(res.headers['content-length']);
        if (declared > CIMD_MAX_BYTES) return fail('the metadata document is larger than 5 KiB');
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > CIMD_MAX_BYTES) return fail('the metadata document is larger than 5 KiB');
          chunks.push(c);
        });
        res.on('error', (e) => unreachable(`reading the body: ${e.message}`));
        res.on('end', () => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          cancel();
          resolve({
            body: Buffer.concat(chunks).toString('utf8'),
            maxAgeMs: cacheLifetimeMs(res.headers, this.clock.now()),
          });
        });
      });
      req.end();
    });
  }
}

/** The freshness lifetime the response headers give (RFC 9111 §4.2.1), before clamping; 0 when none or no-store. */
export function cacheLifetimeMs(headers: Record<string, string | string[] | undefined>, now: number): number {
  const cc = String(headers['cache-control'] ?? '').toLowerCase();
  if (/(^|,)\s*(no-store|no-cache)\b/.test(cc)) return 0;
  const maxAge = /(?:^|,)\s*max-age\s*=\s*"?(\d+)"?/.exec(cc);
  if (maxAge) return Number(maxAge[1]) * 1000;
  const expires = headers['expires'];
  if (typeof expires === 'string') {
    const t = Date.parse(expires);
    const date = typeof headers['date'] === 'string' ? Date.parse(headers['date']) : now;
    if (!Number.isNaN(t)) return Math.max(0, t - (Number.isNaN(date) ? now : date));
  }
  return 0;
}
