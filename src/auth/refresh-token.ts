import { hashSecret, hmac, randomSecret } from '../base/secrets.js';

/**
 * The refresh token string: `<family tag>.<secret>`, opaque to clients (RFC 6749 §1.5). The tag (128 random bits) is
 * the same for every token of one authorization's family; the secret of a successor is HMAC(token, salt), with a salt
 * the rotation chooses and stores on the consumed token's row, so a retry within the reuse window gets the very same
 * successor and only a holder of the token can obtain it (the salt never leaves the database: a stolen token that
 * was rotated already does not lead to the tokens after it). Rows store only hashes, of the token and of the tag
 * (domain/refresh-tokens.ts).
 */
export interface RefreshTokenValue {
  token: string;
  /** SHA-256 of the family tag: what rows store to recognise the family. */
  family: string;
}

const TAGGED = /^([A-Za-z0-9_-]{22})\.[A-Za-z0-9_-]{43}$/;

const withTag = (tag: string, secret: string): RefreshTokenValue => ({
  token: `${tag}.${secret}`,
  family: hashSecret(tag),
});

/** The first token of a new family. */
export const newRefreshToken = (): RefreshTokenValue => withTag(randomSecret(16), randomSecret());

/**
 * The successor of `token`: same family, secret HMAC(token, salt). A token from before families (no tag) starts one
 * here, with a tag derived from it, so that a retry derives the same successor.
 */
export function successorOf(token: string, salt: string): RefreshTokenValue {
  const tag = TAGGED.exec(token)?.[1] ?? hmac(token, `${salt}.family`).slice(0, 22);
  return withTag(tag, hmac(token, salt));
}

/** The family of a well-formed token, or undefined. */
export function familyOf(token: string): string | undefined {
  const tag = TAGGED.exec(token)?.[1];
  return tag === undefined ? undefined : hashSecret(tag);
}
