import { describe, expect, it } from 'vitest';
import { safeNext } from '../../src/web/safe-next.js';

/** Where sign-in may send the browser back to: only a path on the authorization server's own origin. */
describe('safeNext: the open-redirect attempts fall back to the dashboard', () => {
  const HOSTILE = [
    '//evil.example/x',
    '/\t/evil.example/x',
    '/\t\\evil.example',
    '/\\evil.example',
    '\\\\evil.example',
    '/\n/evil.example',
    '/\r\n/evil.example',
    '/ /evil.example',
    'https://evil.example/',
    'javascript:alert(1)',
    '',
    'dashboard',
    '/%09/evil.example',
  ];
  for (const next of HOSTILE) {
    it(JSON.stringify(next), () => {
      const out = safeNext(next);
      expect(new URL(out, 'https://as.example').origin).toBe('https://as.example');
      expect(out.startsWith('//')).toBe(false);
    });
  }
  it('not a string (a repeated query parameter) → the fallback', () => {
    expect(safeNext(['/a', '/b'])).toBe('/dashboard');
    expect(safeNext(undefined)).toBe('/dashboard');
  });
  it('a local path is kept, with its query', () => {
    expect(safeNext('/oauth2/auth?client_id=x&state=y')).toBe('/oauth2/auth?client_id=x&state=y');
  });
  it('control characters and characters above U+00FF come back percent-encoded, safe in a header', () => {
    for (const next of ['/dash\u0001board', '/caf\u00e9', '/\u4e2d\u6587', '/a?b=\u2603']) {
      const out = safeNext(next);
      expect(out).toMatch(/^\/[\x21-\x7e]*$/);
    }
  });
});
