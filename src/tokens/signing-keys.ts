import { createPublicKey, type JsonWebKeyInput, type KeyObject } from 'node:crypto';
import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import type { Kysely } from 'kysely';
import { atMostEvery, type Clock } from '../base/clock.js';
import { randomAlphanumeric } from '../base/ids.js';
import { LOCK_KEYS, withExclusiveLock } from '../store/exclusive.js';
import type { Database } from '../store/schema.js';

export type SigningAlg = 'RS256' | 'ES256';

type KeyLike = CryptoKey;

interface LoadedKey {
  kid: string;
  alg: SigningAlg;
  publicJwk: JWK;
  /** For node:crypto's verify (jwt-verify.ts). */
  publicKey: KeyObject;
  privateKey: KeyLike;
  createdAt: number;
  retiredAt: number | null;
}

/** How often an instance re-reads the key table, so a rotation done elsewhere reaches it: the key-pickup bound. */
export const KEY_REFRESH_INTERVAL_MS = 5_000;
/**
 * A new key signs only this long after it was created: by then every instance has re-read the table and publishes it
 * in its JWKS, so no verifier meets a token signed by a key it has not loaded. Longer than the refresh interval, with
 * room for clock skew between instances.
 */
export const KEY_ACTIVATION_DELAY_MS = 10_000;
/** An unknown `kid` triggers a re-read at most this often, so forged kids cannot hammer the database. */
const UNKNOWN_KID_RELOAD_MS = 1_000;

/**
 * The signing keys, kept in the database so that every instance and surface signs and verifies with the same set.
 * The newest key older than KEY_ACTIVATION_DELAY_MS signs — the same one on every instance — and a rotation reaches
 * every instance within KEY_REFRESH_INTERVAL_MS. Retired keys stay published (and accepted) for `overlapMs`, the
 * longest life of a token they may have signed, then drop out of the JWKS.
 */
export class SigningKeys {
  private keys: LoadedKey[] = [];
  /** On the monotonic clock (base/clock.ts): a wall clock set back must not stop the reloads. */
  private loadedAt = Number.NEGATIVE_INFINITY;
  private loading: Promise<void> | undefined;
  private readonly unknownKidReloadDue: () => boolean;
  private readonly goneListeners: ((kids: string[]) => void)[] = [];

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly alg: SigningAlg,
    private readonly overlapMs: number,
  ) {
    this.unknownKidReloadDue = atMostEvery(UNKNOWN_KID_RELOAD_MS, clock);
  }

  /**
   * Loads the keys, creating the first one if the table has none: under a lock, so that instances starting together
   * on an empty database end with one key.
   */
  async init(): Promise<void> {
    await this.reload();
    if (this.keys.some((k) => k.retiredAt === null)) return;
    const fresh = await this.newKeyRow();
    await withExclusiveLock(this.db, LOCK_KEYS.firstSigningKey, async (trx) => {
      const existing = await trx
        .selectFrom('signing_keys')
        .select('kid')
        .where('retired_at', 'is', null)
        .execute();
      if (existing.length === 0) await trx.insertInto('signing_keys').values(fresh).execute();
    });
    await this.reload();
  }

  /** Retires the current signing key and starts signing with a new one. Returns the new kid. */
  async rotate(): Promise<string> {
    const now = this.clock.now();
    const row = await this.newKeyRow();
    await this.db.insertInto('signing_keys').values(row).execute();
    const kid = row.kid;
    await this.db
      .updateTable('signing_keys')
      .set({ retired_at: now })
      .where('kid', '!=', kid)
      .where('retired_at', 'is', null)
      .execute();
    await this.reload();
    return kid;
  }

  /**
   * Signs with a new key at once and deletes every other one: for a key that may have leaked (a database backup holds
   * the private keys). Unlike `rotate`, nothing it signed stays valid: every instance drops the deleted keys within
   * KEY_REFRESH_INTERVAL_MS, forgets every token it had verified (`whenKeysGone`) and from then refuses every token
   * they signed, so members sign in again and apps refresh (refresh tokens are not signed). The new key signs without
   * KEY_ACTIVATION_DELAY_MS, being the only one; until an instance has re-read the table it may still sign with a
   * deleted key, and those tokens are refused as soon as it has. Returns the new kid and the kids of the keys that
   * were still accepted.
   */
  async withdraw(): Promise<{ kid: string; withdrawn: string[] }> {
    const row = await this.newKeyRow();
    const withdrawn = await this.db.transaction().execute(async (trx) => {
      const existing = await trx
        .selectFrom('signing_keys')
        .select(['kid', 'retired_at'])
        .orderBy('created_at', 'desc')
        .execute();
      await trx.insertInto('signing_keys').values(row).execute();
      await trx.deleteFrom('signing_keys').where('kid', '!=', row.kid).execute();
      return existing.filter((r) => this.accepted(r, row.created_at)).map((r) => r.kid);
    });
    await this.reload();
    return { kid: row.kid, withdrawn };
  }

  /**
   * Re-reads the table every KEY_REFRESH_INTERVAL_MS on a timer, for a serving instance. The reads `refreshIfStale`
   * makes happen only when a token is signed or verified anew, and an instance whose callers all present tokens its
   * cache holds would never have learnt of a withdrawal (measured: a withdrawn key's session still 200 on `/me` a
   * minute later). A failed read is the store's outage, which its own watch logs; the next tick tries again. Returns
   * what stops it.
   */
  keepCurrent(): () => void {
    const timer = setInterval(() => void this.reload().catch(() => {}), KEY_REFRESH_INTERVAL_MS);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** Calls `listener` whenever a key this instance had loaded is no longer accepted (withdrawn, or past its overlap). */
  whenKeysGone(listener: (kids: string[]) => void): void {
    this.goneListeners.push(listener);
  }

  async signingKey(): Promise<LoadedKey> {
    await this.refreshIfStale();
    const activeFrom = this.clock.now() - KEY_ACTIVATION_DELAY_MS;
    // Newest first: the newest activated key; before any is activated (a first start), the first key ever made.
    const key = this.keys.find((k) => k.createdAt <= activeFrom) ?? this.keys.at(-1);
    if (!key) throw new Error('no signing key: run `svc migrate` and start once, or `svc keys rotate`');
    return key;
  }

  /** The public key for a `kid` and `alg`, or undefined. Re-reads the table once for an unknown kid. */
  async verificationKey(kid: string, alg: string): Promise<KeyObject | undefined> {
    await this.refreshIfStale();
    let key = this.keys.find((k) => k.kid === kid);
    if (!key && this.unknownKidReloadDue()) {
      await this.reload();
      key = this.keys.find((k) => k.kid === kid);
    }
    return key && key.alg === alg ? key.publicKey : undefined;
  }

  /** RFC 7517 JWK Set of the keys a verifier may meet: the signing key and those still within their overlap. */
  async jwks(): Promise<{ keys: JWK[] }> {
    await this.refreshIfStale();
    return { keys: this.keys.map((k) => ({ ...k.publicJwk, kid: k.kid, alg: k.alg, use: 'sig' })) };
  }

  /** Whether a key is accepted at `now`: the signing key, or retired less than `overlapMs` ago. */
  private accepted(key: { retired_at: number | null }, now: number): boolean {
    return key.retired_at === null || key.retired_at + this.overlapMs > now;
  }

  private async refreshIfStale(): Promise<void> {
    if (this.clock.monotonic() - this.loadedAt > KEY_REFRESH_INTERVAL_MS) await this.reload();
  }

  private reload(): Promise<void> {
    this.loading ??= this.readKeys().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async readKeys(): Promise<void> {
    const now = this.clock.now();
    const readAt = this.clock.monotonic();
    const rows = await this.db.selectFrom('signing_keys').selectAll().orderBy('created_at', 'desc').execute();
    const live = rows.filter((r) => this.accepted(r, now));
    const loaded = new Map(this.keys.map((k) => [k.kid, k]));
    this.keys = await Promise.all(
      live.map(async (r) => {
        // Importing a key costs milliseconds; the table is re-read every few seconds, so keep what is loaded.
        const known = loaded.get(r.kid);
        if (known) return { ...known, retiredAt: r.retired_at };
        const alg = r.alg as SigningAlg;
        const publicJwk = JSON.parse(r.public_jwk) as JWK;
        return {
          kid: r.kid,
          alg,
          publicJwk,
          publicKey: createPublicKey({ key: publicJwk as JsonWebKeyInput['key'], format: 'jwk' }),
          privateKey: (await importJWK(JSON.parse(r.private_jwk) as JWK, alg)) as KeyLike,
          createdAt: r.created_at,
          retiredAt: r.retired_at,
        };
      }),
    );
    // Newest first; of keys made in the same millisecond, the one a rotation left unretired.
    this.keys.sort(
      (x, y) => y.createdAt - x.createdAt || Number(x.retiredAt !== null) - Number(y.retiredAt !== null),
    );
    this.loadedAt = readAt;
    const kept = new Set(live.map((r) => r.kid));
    const gone = [...loaded.keys()].filter((kid) => !kept.has(kid));
    if (gone.length) for (const listener of this.goneListeners) listener(gone);
  }

  /** A new key pair as a row of `signing_keys` (generated before any lock is taken: it takes a while). */
  private async newKeyRow() {
    const { publicKey, privateKey } = await generateKeyPair(this.alg, { extractable: true });
    const { kty, n, e, crv, x, y } = await exportJWK(publicKey);
    const publicJwk = Object.fromEntries(Object.entries({ kty, n, e, crv, x, y }).filter(([, v]) => v));
    return {
      kid: randomAlphanumeric(16),
      alg: this.alg,
      public_jwk: JSON.stringify(publicJwk),
      private_jwk: JSON.stringify(await exportJWK(privateKey)),
      created_at: this.clock.now(),
      retired_at: null,
    };
  }
}
