/**
 * A path on this origin to return to after sign-in, or the fallback: no open redirect. `next` is resolved the way a
 * browser resolves a Location (the WHATWG URL parser drops tabs and newlines and reads `\\` as `/`, so `/\t/evil` and
 * `/\\evil` are other hosts) and kept only when it stays on the origin; it is answered in its parsed, percent-encoded
 * form, so no control character or non-ASCII character reaches a header.
 */
export function safeNext(next: unknown, fallback = '/dashboard'): string {
  if (typeof next !== 'string' || !next.startsWith('/') || next.length > 2048) return fallback;
  let resolved: URL;
  try {
    resolved = new URL(next, SAME_ORIGIN_PROBE);
  } catch {
    return fallback;
  }
  if (resolved.origin !== SAME_ORIGIN_PROBE) return fallback;
  const path = `${resolved.pathname}${resolved.search}`;
  return path.startsWith('//') ? fallback : path;
}

/** Any origin of our own will do to see whether a relative reference leaves it. */
const SAME_ORIGIN_PROBE = 'https://as.invalid';
