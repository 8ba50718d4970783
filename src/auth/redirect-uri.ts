/**
 * Redirect URI rules: what a client may register (RFC 7591 §2, RFC 8252 §7, OAuth 2.1 §2.3.1) and how a requested
 * URI matches a registered one (exact string comparison, RFC 6749 §3.1.2.3 / OAuth 2.1 §4.1.1, except the port of
 * loopback redirects, RFC 8252 §7.3).
 */

const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]']);
/** Schemes that are never a redirect target. */
const FORBIDDEN_SCHEMES = new Set([
  'javascript:',
  'data:',
  'file:',
  'vbscript:',
  'about:',
  'blob:',
  'ftp:',
  'ws:',
  'wss:',
]);
const MAX_LENGTH = 2000;

export type ApplicationType = 'web' | 'native';

export function isLoopbackRedirect(uri: string): boolean {
  if (!URL.canParse(uri)) return false;
  const u = new URL(uri);
  return u.protocol === 'http:' && LOOPBACK_HOSTS.has(u.hostname);
}

/** Why a redirect URI cannot be registered, or undefined when it can. */
export function redirectUriProblem(
  uri: unknown,
  applicationType: ApplicationType,
  o: { operatorTrusted?: boolean } = {},
): string | undefined {
  if (typeof uri !== 'string' || uri.length === 0 || uri.length > MAX_LENGTH) {
    return 'each redirect URI must be a non-empty string of at most 2000 characters';
  }
  if (!URL.canParse(uri)) return `${uri} is not an absolute URI`;
  const u = new URL(uri);
  // RFC 6749 §3.1.2: the endpoint URI must not include a fragment.
  if (uri.includes('#')) return `${uri} must not contain a fragment`;
  if (u.username || u.password) return `${uri} must not contain user information`;
  if (u.protocol === 'https:') return undefined;
  if (u.protocol === 'http:') {
    return LOOPBACK_HOSTS.has(u.hostname)
      ? undefined
      : `${uri}: http is allowed only on loopback (localhost, 127.0.0.1, [::1]); use https`;
  }
  if (FORBIDDEN_SCHEMES.has(u.protocol)) return `${uri} uses a scheme that cannot receive a redirect`;
  // RFC 8252 §7.1: private-use URI schemes are for native apps, in reverse domain name form (contain a period).
  if (applicationType !== 'native') {
    return `${uri}: a private-use scheme needs application_type "native"`;
  }
  // The operator's pre-registered file may list a published scheme that is not in that form (e.g. cursor://).
  if (!o.operatorTrusted && !u.protocol.slice(0, -1).includes('.')) {
    return `${uri}: a private-use scheme must be a reverse domain name such as com.example.app (RFC 8252 §7.1)`;
  }
  return undefined;
}

/** Whether `requested` matches one of the client's registered redirect URIs. */
export function matchRedirectUri(registered: readonly string[], requested: string): boolean {
  if (registered.includes(requested)) return true;
  if (!isLoopbackRedirect(requested) || requested.includes('#')) return false;
  const r = new URL(requested);
  // RFC 8252 §7.3: loopback redirect URIs match with any port; everything else must be the same.
  return registered.some((candidate) => {
    if (!isLoopbackRedirect(candidate)) return false;
    const c = new URL(candidate);
    return (
      c.hostname === r.hostname &&
      c.pathname === r.pathname &&
      c.search === r.search &&
      !r.username &&
      !r.password
    );
  });
}
