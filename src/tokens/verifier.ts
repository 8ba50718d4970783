import { decodeJwt, decodeProtectedHeader, type JWTPayload } from 'jose';
import type { Clock } from '../base/clock.js';
import type { CacheCounter } from '../base/metrics.js';
import { TOKEN_TYPES } from './jwt.js';
import type { LivenessCache } from './liveness.js';
import { Lru } from '../base/lru.js';
import { verifyJwt } from './jwt-verify.js';
import type { SigningAlg, SigningKeys } from './signing-keys.js';

/** Why a token was refused; each maps to an RFC 6750 error and a REST error code at the edge. */
export type TokenFailure =
  'malformed' | 'invalid' | 'expired' | 'not_yet_valid' | 'revoked' | 'wrong_audience';

export class TokenError extends Error {
  override name = 'TokenError';
  constructor(
    readonly failure: TokenFailure,
    message: string,
  ) {
    super(message);
  }
}

/** Who is calling, as proved by a verified token. */
export type Principal = SessionPrincipal | OAuthPrincipal;

export interface SessionPrincipal {
  kind: 'session';
  userId: string;
  sessionId: string;
}

export interface OAuthPrincipal {
  kind: 'oauth';
  userId: string;
  clientId: string;
  scopes: ReadonlySet<string>;
  /** The connection (grant) this token was minted under, when it has one (docs/contract.md#connections). */
  connectionId: string | undefined;
  agencyId: string | undefined;
  memberId: string | undefined;
  claims: JWTPayload;
}

export type TokenKind = Principal['kind'];

/**
 * A dashboard API token (docs/contract.md#tokens), minted by the token exchange (RFC 8693) for the agency MCP server. A kind of its
 * own, verified only by `verifyDashboard`: `verify` never accepts it, and `verifyDashboard` accepts nothing else.
 */
export interface DashboardPrincipal {
  kind: 'dashboard';
  userId: string;
  /** The agent's client (the client the subject token was issued to). */
  clientId: string;
  scopes: ReadonlySet<string>;
  connectionId: string;
  agencyId: string;
  memberId: string;
  /** The connection's effective permissions when the token was minted (an upper bound; re-checked per call). */
  permissions: ReadonlySet<string>;
}

type EntryKind = TokenKind | 'dashboard';
const DASHBOARD: readonly EntryKind[] = ['dashboard'];

interface VerifiedEntry {
  /** The token itself: the cache is keyed by its signature only, and a hit must be this exact token. */
  token: string;
  kind: EntryKind;
  principal: Principal | DashboardPrincipal;
  audiences: readonly string[];
  expMs: number;
  nbfMs: number;
}

/** Only the algorithms we sign with; `none` and HMAC (alg confusion, RFC 8725 §2.1) never verify. */
const ALGORITHMS = ['RS256', 'ES256'];
/** Longer than any token we mint; a bigger bearer string is refused before any parsing. */
const MAX_TOKEN_LENGTH = 8192;
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

export interface VerifierOptions {
  issuer: () => string;
  keys: SigningKeys;
  clock: Clock;
  cacheSize: number;
  sessions: LivenessCache;
  /** Connection liveness (OAuth tokens carry `cid`, the grant they were minted under). */
  connections: LivenessCache;
  /** Hits and misses of the verified-token cache, for the metrics. */
  cacheCounter?: CacheCounter;
  /**
   * Told when a token this service signed is dated further ahead of this instance's clock than MAX_CLOCK_SKEW_MS
   * allows (`aheadMs`): this instance's clock is behind its issuer's (set back, or drifting), and every token issued
   * within the difference is refused until it catches up. Something an operator must hear of, not a client's fault.
   */
  clockBehind?: (aheadMs: number) => void;
}

/**
 * How far ahead of this instance's clock a token's `iat` and `nbf` may be: another instance's clock may run ahead
 * (RFC 7519 §4.1.5's leeway). Without it on `nbf`, which every token carries equal to `iat`, a token signed on an
 * instance one second ahead was refused "not valid yet" by the others for that second. `exp` has none.
 */
export const MAX_CLOCK_SKEW_MS = 60_000;

/**
 * Verifies bearer JWTs for every resource server in the process. Signature, issuer, type and times are checked once
 * and cached, keyed by the token, until its `exp` (docs/contract.md#tokens); audience and liveness are checked on every call.
 */
export class TokenVerifier {
  private readonly cache: Lru<string, VerifiedEntry>;

  constructor(private readonly o: VerifierOptions) {
    this.cache = new Lru(o.cacheSize);
    // A token verified with a key no longer accepted must not be taken from the cache for the rest of its life.
    o.keys.whenKeysGone(() => this.cache.clear());
  }

  /** Verifies `token` for `audience`; accepts only the token kinds in `accept`. Throws TokenError. */
  async verify(token: string, audience: string, accept: readonly TokenKind[]): Promise<Principal> {
    // The hot case, an agent presenting the same token call after call, without the chain of promises below.
    const known = this.cachedPrincipal(token, audience, accept);
    if (known) {
      this.countCachedHit(known);
      return known;
    }
    const entry = await this.usable(token, audience, accept);
    const principal = entry.principal as Principal;
    await this.assertLive(principal);
    return principal;
  }

  /**
   * The principal `verify` would return when everything it checks is already known from the caches — the token's
   * signature verified and cached, its session or connection known live — else undefined (the caller then calls
   * `verify`). Synchronous and counts nothing, for a fast path; it counts its hits with `countCachedHit`.
   */
  cachedPrincipal(token: string, audience: string, accept: readonly TokenKind[]): Principal | undefined {
    const entry = this.cachedUsable(token, audience, accept);
    if (entry === undefined) return undefined;
    const p = entry.principal as Principal;
    const live =
      p.kind === 'session'
        ? this.o.sessions.isKnownLive(p.sessionId)
        : p.connectionId !== undefined && this.o.connections.isKnownLive(p.connectionId);
    return live ? p : undefined;
  }

  /** Counts what `verify` would have counted for a principal found by `cachedPrincipal`. */
  countCachedHit(p: Principal): void {
    this.o.cacheCounter?.lookup(true);
    (p.kind === 'session' ? this.o.sessions : this.o.connections).countHit();
  }

  /**
   * The OAuth principal of an access token this issuer signed and that has not expired, whatever its audience, or
   * undefined: what the revocation endpoint needs (RFC 7009 §2.2: anything else is answered like an unknown token).
   */
  async inspectAccessToken(token: string): Promise<OAuthPrincipal | undefined> {
    try {
      const entry = await this.verified(token);
      if (entry.kind !== 'oauth' || entry.expMs <= this.o.clock.now()) return undefined;
      return entry.principal as OAuthPrincipal;
    } catch {
      return undefined;
    }
  }

  /**
   * Verifies a dashboard API token for `audience`. Liveness is not checked here: the dashboard API reads the
   * connection and the member on every call (docs/contract.md#agency-mcp-server).
   */
  async verifyDashboard(token: string, audience: string): Promise<DashboardPrincipal> {
    let entry = this.cachedUsable(token, audience, DASHBOARD);
    if (entry) this.o.cacheCounter?.lookup(true);
    else entry = await this.usable(token, audience, DASHBOARD);
    return entry.principal as DashboardPrincipal;
  }

  /** The cached entry of exactly this token when nothing in `refusal` stands against it here, else undefined. */
  private cachedUsable(
    token: string,
    audience: string,
    accept: readonly EntryKind[],
  ): VerifiedEntry | undefined {
    const entry = this.cached(token);
    return entry === undefined || this.refusal(entry, audience, accept) ? undefined : entry;
  }

  private async usable(
    token: string,
    audience: string,
    accept: readonly EntryKind[],
  ): Promise<VerifiedEntry> {
    const entry = await this.verified(token);
    const refused = this.refusal(entry, audience, accept);
    if (refused) throw refused;
    return entry;
  }

  /**
   * Why a verified token may not be used here now (times, kind, audience), or undefined: the one rule both `verify`
   * and the fast path's `cachedPrincipal` apply, so a check added here holds for both.
   */
  private refusal(
    entry: VerifiedEntry,
    audience: string,
    accept: readonly EntryKind[],
  ): TokenError | undefined {
    const now = this.o.clock.now();
    if (entry.expMs <= now) return new TokenError('expired', 'The access token expired');
    if (entry.nbfMs > now + MAX_CLOCK_SKEW_MS) {
      // Verified here before this clock was set back: dated by one of our clocks all the same.
      this.o.clockBehind?.(entry.nbfMs - now);
      return new TokenError('not_yet_valid', 'The access token is not valid yet');
    }
    if (!accept.includes(entry.kind))
      return new TokenError('invalid', 'This kind of token is not accepted here');
    if (!entry.audiences.includes(audience))
      return new TokenError('wrong_audience', 'The access token was issued for another audience');
    return undefined;
  }

  private async assertLive(p: Principal): Promise<void> {
    if (p.kind === 'session') {
      if (!(await this.o.sessions.isLive(p.sessionId)))
        throw new TokenError('revoked', 'The session has ended');
    } else {
      if (p.connectionId === undefined || !(await this.o.connections.isLive(p.connectionId)))
        throw new TokenError('revoked', 'The connection behind this token has ended');
    }
  }

  private async verified(token: string): Promise<VerifiedEntry> {
    if (token.length > MAX_TOKEN_LENGTH) throw new TokenError('malformed', 'The access token is not a JWT');
    const cached = this.cached(token);
    this.o.cacheCounter?.lookup(cached !== undefined);
    if (cached) return cached;
    if (!JWT_SHAPE.test(token)) throw new TokenError('malformed', 'The access token is not a JWT');
    const entry = await this.verifySignature(token);
    this.cache.set(signatureOf(token), entry);
    return entry;
  }

  /**
   * The cached entry of exactly this token. Keyed by its signature segment and compared whole: an exact match (no
   * question of collisions), at the cost of up to TOKEN_CACHE_SIZE tokens held in memory. Hashing the token with
   * SHA-256 on every request cost about 8 % of a GET /me here; keying the map by the whole token made V8 hash its
   * ~700 characters on every lookup (the LRU's `get` was 3 % of a fast-path /me), the 86 of an ES256 signature less.
   */
  private cached(token: string): VerifiedEntry | undefined {
    const entry = this.cache.get(signatureOf(token));
    return entry !== undefined && entry.token === token ? entry : undefined;
  }

  private async verifySignature(token: string): Promise<VerifiedEntry> {
    let header: ReturnType<typeof decodeProtectedHeader>;
    try {
      header = decodeProtectedHeader(token);
    } catch {
      throw new TokenError('malformed', 'The access token is not a JWT');
    }
    const kind = kindOf(header.typ);
    if (!kind) throw new TokenError('invalid', 'The access token has an unexpected type');
    if (typeof header.alg !== 'string' || !ALGORITHMS.includes(header.alg)) {
      throw new TokenError('invalid', 'The access token is not signed with an accepted algorithm');
    }
    const publicKey =
      typeof header.kid === 'string' && (await this.o.keys.verificationKey(header.kid, header.alg));
    if (!publicKey) throw new TokenError('invalid', 'The access token was not signed by a known key');
    const now = this.o.clock.now();
    const checked = verifyJwt(token, header, publicKey, {
      alg: header.alg as SigningAlg,
      issuer: this.o.issuer(),
      now,
      requiredClaims: REQUIRED_CLAIMS[kind],
      nbfLeewayMs: MAX_CLOCK_SKEW_MS,
    });
    if (!checked.ok) {
      // Signed by us, so dated by one of our clocks: the signature verified before the times were read.
      if (checked.failure === 'not_yet_valid') this.reportAhead(decodeJwt(token), now);
      throw new TokenError(checked.failure, checked.message);
    }
    const payload = checked.payload;
    if (typeof payload.sub !== 'string' || payload.exp === undefined) {
      throw new TokenError('invalid', 'The access token lacks a subject');
    }
    // RFC 7519 §4.1.6: a token issued in the future was not issued by our clock; a minute covers instance skew.
    if (typeof payload.iat !== 'number' || payload.iat * 1000 > now + MAX_CLOCK_SKEW_MS) {
      this.reportAhead(payload, now);
      throw new TokenError('invalid', 'The access token was issued in the future');
    }
    const aud = payload.aud;
    return {
      token,
      kind,
      principal: toPrincipal(kind, payload),
      audiences: Array.isArray(aud) ? aud : typeof aud === 'string' ? [aud] : [],
      expMs: payload.exp * 1000,
      nbfMs: (payload.nbf ?? 0) * 1000,
    };
  }

  /** Tells `clockBehind` how far ahead of this clock a token we signed is dated, when it is past the allowed skew. */
  private reportAhead({ iat, nbf }: JWTPayload, now: number): void {
    const aheadMs =
      Math.max(typeof iat === 'number' ? iat : 0, typeof nbf === 'number' ? nbf : 0) * 1000 - now;
    if (aheadMs > MAX_CLOCK_SKEW_MS) this.o.clockBehind?.(aheadMs);
  }
}

/** The last segment of a compact JWS (the signature), or the whole string when it has no dot. */
const signatureOf = (token: string) => token.slice(token.lastIndexOf('.') + 1);

const REQUIRED_CLAIMS: Record<EntryKind, string[]> = {
  session: ['sub', 'exp', 'iat', 'sid'],
  // Every access token is minted under a connection: without `cid` there is nothing to check liveness against.
  oauth: ['sub', 'exp', 'iat', 'jti', 'client_id', 'cid'],
  dashboard: ['sub', 'exp', 'iat', 'jti', 'client_id', 'cid', 'agency_id', 'member_id'],
};

function kindOf(typ: string | undefined): EntryKind | undefined {
  const t = typ?.toLowerCase().replace(/^application\//, '');
  if (t === TOKEN_TYPES.session) return 'session';
  if (t === TOKEN_TYPES.dashboard) return 'dashboard';
  // RFC 9068 §4: resource servers MUST check that typ is at+jwt (application/at+jwt).
  if (t === TOKEN_TYPES.access) return 'oauth';
  return undefined;
}

const spaceList = (v: unknown) => new Set(typeof v === 'string' ? v.split(' ').filter(Boolean) : []);

function toPrincipal(kind: EntryKind, p: JWTPayload): Principal | DashboardPrincipal {
  const userId = p.sub as string;
  if (kind === 'session') return { kind: 'session', userId, sessionId: String(p['sid']) };
  if (kind === 'dashboard') {
    return {
      kind: 'dashboard',
      userId,
      clientId: String(p['client_id']),
      scopes: spaceList(p['scope']),
      connectionId: String(p['cid']),
      agencyId: String(p['agency_id']),
      memberId: String(p['member_id']),
      permissions: spaceList(p['perms']),
    };
  }
  const str = (v: unknown) => (typeof v === 'string' ? v : undefined);
  return {
    kind: 'oauth',
    userId,
    clientId: String(p['client_id']),
    scopes: new Set(typeof p['scope'] === 'string' ? p['scope'].split(' ').filter(Boolean) : []),
    connectionId: str(p['cid']),
    agencyId: str(p['agency_id']),
    memberId: str(p['member_id']),
    claims: p,
  };
}
