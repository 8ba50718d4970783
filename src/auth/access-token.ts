import { KeyObject, sign } from 'node:crypto';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { toEpochSeconds } from '../domain/clock.js';
import type { ConnectionRow } from '../domain/connections.js';
import { randomAlphanumeric } from '../domain/ids.js';
import { TOKEN_TYPES } from '../tokens/jwt.js';

/** SPEC §5.4 / §8: access tokens of the agency MCP flow live one hour. */
export const ACCESS_TOKEN_TTL_SECONDS = 3600;

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
const keyObjects = new WeakMap<object, KeyObject>();

/**
 * An RFC 9068 access token for a connection: `aud` = the resource, `sub` = the user, and the claims of DESIGN §4
 * (client_id, scope, jti, agency_id, member_id, cid). Resource servers check `cid` is live on every call.
 *
 * Signed with the same DB-held key as `signJwt`, and verified by jose like every other token, but the signature is
 * computed with node:crypto: jose 6 signs through WebCrypto, which here cost 600 µs per RS256 signature on one
 * pinned core against 225 µs for `crypto.sign` — the difference between ~970 and the target of 1,500 refresh
 * rotations per second (see the refresh benchmark). The JWS is the RFC 7515 compact serialization.
 */
export async function mintConnectionAccessToken(
  ctx: AppContext,
  c: Pick<ConnectionRow, 'id' | 'user_id' | 'client_id' | 'resource' | 'agency_id' | 'member_id'>,
  scope: string,
): Promise<string> {
  const key = await ctx.keys.signingKey();
  let keyObject = keyObjects.get(key.privateKey);
  if (!keyObject) {
    keyObject = KeyObject.from(key.privateKey);
    keyObjects.set(key.privateKey, keyObject);
  }
  const now = toEpochSeconds(ctx.clock.now());
  const header = b64({ alg: key.alg, kid: key.kid, typ: TOKEN_TYPES.access });
  const payload = b64({
    client_id: c.client_id,
    scope,
    ...(c.agency_id ? { agency_id: c.agency_id } : {}),
    ...(c.member_id ? { member_id: c.member_id } : {}),
    cid: c.id,
    iss: urls.issuer(ctx.config),
    sub: c.user_id,
    aud: c.resource,
    iat: now,
    nbf: now,
    exp: now + ACCESS_TOKEN_TTL_SECONDS,
    jti: randomAlphanumeric(22),
  });
  const input = `${header}.${payload}`;
  // RFC 7518 §3.3 (RS256: RSASSA-PKCS1-v1_5 with SHA-256) and §3.4 (ES256: R || S, not DER).
  // The callback form signs on libuv's thread pool: the event loop keeps serving while other cores sign.
  const signature = await new Promise<Buffer>((resolve, reject) =>
    sign(
      'sha256',
      Buffer.from(input),
      { key: keyObject, ...(key.alg === 'ES256' ? { dsaEncoding: 'ieee-p1363' as const } : {}) },
      (err, sig) => (err ? reject(err) : resolve(sig)),
    ),
  );
  return `${input}.${signature.toString('base64url')}`;
}
