import type { IncomingMessage } from 'node:http';
import type { TokenFailure } from '../tokens/verifier.js';

/** Why no usable bearer token was found in the request. */
export type BearerFailure = 'missing' | 'invalid_request' | TokenFailure;

export class BearerError extends Error {
  override name = 'BearerError';
  constructor(
    readonly failure: BearerFailure,
    message: string,
  ) {
    super(message);
  }
}

// RFC 6750 §2.1: credentials = "Bearer" 1*SP b64token; the scheme is case-insensitive (RFC 9110 §11.1).
const BEARER = /^bearer +([A-Za-z0-9\-._~+/]+=*) *$/i;

/** The bearer token of a request, from exactly one `Authorization: Bearer <token>` header. Throws BearerError. */
export function extractBearer(request: IncomingMessage): string {
  const raw = request.rawHeaders;
  let value: string | undefined;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization') {
      if (value !== undefined)
        throw new BearerError('invalid_request', 'Send one Authorization header, not several');
      value = raw[i + 1]!;
    }
  }
  if (value === undefined)
    throw new BearerError('missing', 'No bearer token; send Authorization: Bearer <token>');
  const match = BEARER.exec(value);
  if (!match) {
    const why = /^bearer\s*$/i.test(value)
      ? 'The bearer token is empty'
      : /^bearer /i.test(value)
        ? 'Send exactly one bearer token'
        : 'The Authorization header must use the Bearer scheme';
    throw new BearerError('invalid_request', why);
  }
  return match[1]!;
}

/** The RFC 6750 §3.1 error code for a failure; none when the request had no credentials at all (§3). */
export function rfc6750Error(failure: BearerFailure): 'invalid_request' | 'invalid_token' | undefined {
  if (failure === 'missing') return undefined;
  return failure === 'invalid_request' ? 'invalid_request' : 'invalid_token';
}

/** A `WWW-Authenticate: Bearer ...` value from auth-params (RFC 6750 §3, RFC 9728 §5.1); undefined ones are left out. */
export function bearerChallenge(params: Record<string, string | undefined>): string {
  const parts = Object.entries(params)
    .filter((entry): entry is [string, string] => entry[1] !== undefined)
    .map(([k, v]) => `${k}="${v.replace(/["\\]/g, '')}"`);
  return parts.length ? `Bearer ${parts.join(', ')}` : 'Bearer';
}
