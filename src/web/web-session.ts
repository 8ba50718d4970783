import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { sessionKindOf } from '../domain/sessions.js';
import { findUserById } from '../domain/users.js';
import type { Database } from '../store/schema.js';
import { TokenError, type TokenVerifier } from '../tokens/verifier.js';
import { PageError } from './html.js';
import { randomSecret, safeEqual } from '../base/secrets.js';

/**
 * The browser side of sign-in, shared by the authorization endpoint, the sign-in page and the member pages: a
 * session cookie holding a browser session token (the `sid` it names must be live), and CSRF
 * protection by a double-submitted random token plus an Origin check. Cookies are HttpOnly, SameSite=Lax, and Secure
 * with the `__Host-` prefix when the pages are served over https.
 */
export interface WebSessionDeps {
  /** The authorization server's public URL: the pages' origin, and the audience of browser session tokens. */
  issuer: () => string;
  verifier: Pick<TokenVerifier, 'verify'>;
  /** Life of the session cookie, the same as the session's. */
  sessionTtlSeconds: number;
}

export interface WebUser {
  userId: string;
  sessionId: string;
}

/** The service's own cookie values: session JWTs and CSRF tokens, all base64url with dots; nothing to decode. */
const OWN_COOKIE_VALUE = /^[A-Za-z0-9._-]{1,4096}$/;
const OWN_COOKIES = new Set(['svc_session', 'svc_csrf', '__Host-svc_session', '__Host-svc_csrf']);
const CSRF_SHAPE = /^[A-Za-z0-9_-]{43}$/;
const CSRF_TTL_SECONDS = 24 * 3600;

/**
 * The service's own cookies of a request. Other sites' cookies on the same host (analytics and the like) are never
 * decoded, so a malformed one (`_ga=GA1.1.100%`) cannot break a page; a value of ours in another shape is ignored.
 */
function readCookies(request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {};
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (!OWN_COOKIES.has(k) || k in out || !OWN_COOKIE_VALUE.test(v)) continue;
    out[k] = v;
  }
  return out;
}

export class WebSessions {
  constructor(private readonly deps: WebSessionDeps) {}

  private get https(): boolean {
    return this.deps.issuer().startsWith('https://');
  }

  private cookieName(base: string): string {
    return this.https ? `__Host-${base}` : base;
  }

  private setCookie(reply: FastifyReply, name: string, value: string, maxAgeSeconds: number): void {
    const attrs = [
      `${this.cookieName(name)}=${encodeURIComponent(value)}`,
      'Path=/',
      'HttpOnly',
      'SameSite=Lax',
      `Max-Age=${maxAgeSeconds}`,
    ];
    if (this.https) attrs.push('Secure');
    const prev = reply.getHeader('set-cookie');
    const list = Array.isArray(prev) ? prev : prev ? [String(prev)] : [];
    reply.header('set-cookie', [...list, attrs.join('; ')]);
  }

  /**
   * The signed-in user of this browser, or undefined. Only a browser session opens the pages: an API session token
   * put in the cookie (what a program holding one would try) is refused, whatever its audience.
   */
  async currentUser(request: FastifyRequest): Promise<WebUser | undefined> {
    const token = readCookies(request)[this.cookieName('svc_session')];
    if (!token) return undefined;
    try {
      const p = await this.deps.verifier.verify(token, this.deps.issuer(), ['session']);
      if (p.kind !== 'session' || sessionKindOf(p.sessionId) !== 'browser') return undefined;
      return { userId: p.userId, sessionId: p.sessionId };
    } catch (e) {
      if (e instanceof TokenError) return undefined;
      throw e;
    }
  }

  setSessionCookie(reply: FastifyReply, token: string): void {
    this.setCookie(reply, 'svc_session', token, this.deps.sessionTtlSeconds);
  }

  clearSessionCookie(reply: FastifyReply): void {
    this.setCookie(reply, 'svc_session', '', 0);
  }

  /** The CSRF token of this browser, set as a cookie when it has none; forms carry it in a hidden `csrf` field. */
  csrfToken(request: FastifyRequest, reply: FastifyReply): string {
    const existing = readCookies(request)[this.cookieName('svc_csrf')];
    if (existing && CSRF_SHAPE.test(existing)) return existing;
    const fresh = randomSecret();
    this.setCookie(reply, 'svc_csrf', fresh, CSRF_TTL_SECONDS);
    return fresh;
  }

  /** Refuses a form post whose CSRF token does not match the cookie, or that comes from another origin. */
  checkCsrf(request: FastifyRequest, form: URLSearchParams): void {
    const origin = request.headers.origin;
    if (origin !== undefined && origin !== new URL(this.deps.issuer()).origin) {
      throw new PageError(403, 'Request refused', 'This form was sent from another site.');
    }
    const cookie = readCookies(request)[this.cookieName('svc_csrf')];
    // A browser that keeps no cookie for this site (blocked, or an app's embedded browser that drops them) would be
    // told to reload for ever: every page sets the cookie, which it never sends back.
    if (!cookie) {
      throw new PageError(
        403,
        'Request refused',
        'This browser sent the form without the cookie its page set: the page was open for more than ' +
          `${CSRF_TTL_SECONDS / 3600} hours, or the browser keeps no cookies for this site. ` +
          'Go back, reload the page and try again, with cookies allowed.',
      );
    }
    const sent = form.getAll('csrf');
    if (sent.length !== 1 || !safeEqual(cookie, sent[0]!)) {
      throw new PageError(
        403,
        'Request refused',
        'The form has expired. Go back, reload the page and try again.',
      );
    }
  }
}

/** The header of a page for a signed-in user: who is signed in, and the CSRF token its sign-out form carries. */
export async function signedInNav(
  db: Kysely<Database>,
  sessions: WebSessions,
  request: FastifyRequest,
  reply: FastifyReply,
  userId: string,
): Promise<{ signedInAs: string; csrf: string }> {
  const username = (await findUserById(db, userId))?.username ?? '';
  return { signedInAs: username, csrf: sessions.csrfToken(request, reply) };
}
