import { type CryptoKey, exportJWK, generateKeyPair, importJWK, type JWK } from 'jose';
import type { Kysely } from 'kysely';
import type { Clock } from '../base/clock.js';
import { randomAlphanumeric } from '../base/ids.js';
import type { Database } from '../store/schema.js';

export type SigningAlg = 'RS256' | 'ES256';

type KeyLike = CryptoKey;

interface LoadedKey {
  kid: string;
  alg: SigningAlg;
  publicJwk: JWK;
  publicKey: KeyLike;
  privateKey: KeyLike;
  createdAt: number;
  retiredAt: number | null;
}

/** How often an instance re-reads the key table, so a rotation done elsewhere reaches it. */
const REFRESH_INTERVAL_MS = 60_000;
/** An unknown `kid` triggers a re-read at most this often, so forged kids cannot hammer the database. */
const UNKNOWN_KID_RELOAD_MS = 10_000;

/**
 * The signing keys, kept in the database so that every instance and surface signs and verifies with the same set.
 * The newest unretired key signs; retired keys stay published (and accepted) for `overlapMs`, the longest life of
 * a token they may have signed, then drop out of the JWKS.
 */
export class SigningKeys {
  private keys: LoadedKey[] = [];
  private loadedAt = 0;
  private lastUnknownKidReload = 0;
  private loading: Promise<void> | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly alg: SigningAlg,
    private readonly overlapMs: number,
  ) {}

  /** Loads the keys, creating the first one if the table is empty. */
  async init(): Promise<void> {
    await this.reload();
    if (!this.keys.some((k) => k.retiredAt === null)) {
      await this.insertNewKey();
      await this.reload();
    }
  }

  /** Retires the current signing key and starts signing with a new one. Returns the new kid. */
  async rotate(): Promise<string> {
    const now = this.clock.now();
    const kid = await this.insertNewKey();
    await this.db
      .updateTable('signing_keys')
      .set({ retired_at: now })
      .where('kid', '!=', kid)
      .where('retired_at', 'is', null)
      .execute();
    await this.reload();
    return kid;
  }

  async signingKey(): Promise<LoadedKey> {
    await this.refreshIfStale();
    const key = this.keys.find((k) => k.retiredAt === null) ?? this.keys[0];
    if (!key) throw new Error('no signing key: run `svc migrate` and start once, or `svc keys rotate`');
    return key;
  }

  /** The public key for a `kid` and `alg`, or undefined. Re-reads the table once for an unknown kid. */
  async verificationKey(kid: string, alg: string): Promise<KeyLike | undefined> {
    await this.refreshIfStale();
    let key = this.keys.find((k) => k.kid === kid);
    const now = this.clock.now();
    if (!key && now - this.lastUnknownKidReload > UNKNOWN_KID_RELOAD_MS) {
      this.lastUnknownKidReload = now;
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

  private async refreshIfStale(): Promise<void> {
    if (this.clock.now() - this.loadedAt > REFRESH_INTERVAL_MS) await this.reload();
  }

  private reload(): Promise<void> {
    this.loading ??= this.readKeys().finally(() => {
      this.loading = undefined;
    });
    return this.loading;
  }

  private async readKeys(): Promise<void> {
    const now = this.clock.now();
    const rows = await this.db.selectFrom('signing_keys').selectAll().orderBy('created_at', 'desc').execute();
    const live = rows.filter((r) => r.retired_at === null || r.retired_at + this.overlapMs > now);
    this.keys = await Promise.all(
      live.map(async (r) => {
        const alg = r.alg as SigningAlg;
        const publicJwk = JSON.parse(r.public_jwk) as JWK;
        return {
          kid: r.kid,
          alg,
          publicJwk,
          publicKey: (await importJWK(publicJwk, alg)) as KeyLike,
          privateKey: (await importJWK(JSON.parse(r.private_jwk) as JWK, alg)) as KeyLike,
          createdAt: r.created_at,
          retiredAt: r.retired_at,
        };
      }),
    );
    this.loadedAt = now;
  }

  private async insertNewKey(): Promise<string> {
    const { publicKey, privateKey } = await generateKeyPair(this.alg, { extractable: true });
    const kid = randomAlphanumeric(16);
    const { kty, n, e, crv, x, y } = await exportJWK(publicKey);
    const publicJwk = Object.fromEntries(Object.entries({ kty, n, e, crv, x, y }).filter(([, v]) => v));
    await this.db
      .insertInto('signing_keys')
      .values({
        kid,
        alg: this.alg,
        public_jwk: JSON.stringify(publicJwk),
        private_jwk: JSON.stringify(await exportJWK(privateKey)),
        created_at: this.clock.now(),
        retired_at: null,
      })
      .execute();
    return kid;
  }
}
