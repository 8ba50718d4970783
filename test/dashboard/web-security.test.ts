import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { boundPort } from '../../src/config/config.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { textOf } from '../helpers/page-text.js';

/**
 * Web security of the pages behind an https AUTH_URL (a proxy terminates TLS; the test talks to the listening port):
 * Secure `__Host-` cookies, CSRF, the sign-in rate limit, and the 401 challenge for client authentication.
 */

let server: TestServer;
let origin: string;
const PUBLIC = 'https://auth.example.test';

beforeAll(async () => {
  server = await startTestServer({
    env: { AUTH_URL: PUBLIC, AGENCY_MCP_URL: 'http://127.0.0.1:4102', SIGNIN_LIMIT_PER_USERNAME: '2' },
  });
  origin = `http://127.0.0.1:${boundPort(server.config, 'auth')}`;
});
afterAll(() => server.close());

const cookiesOf = (res: Response) => res.headers.getSetCookie();

describe(`web security (${ENGINE})`, () => {
  it('cookies are __Host- prefixed, Secure, HttpOnly and SameSite=Lax on https', async () => {
    const res = await fetch(`${origin}/sign-in`);
    const [csrf] = cookiesOf(res);
    expect(csrf).toMatch(
      /^__Host-svc_csrf=[A-Za-z0-9_-]{43}; Path=\/; HttpOnly; SameSite=Lax; Max-Age=\d+; Secure$/,
    );
    const token = csrf!.split(';')[0]!.split('=')[1]!;
    const signIn = await fetch(`${origin}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: `__Host-svc_csrf=${token}`,
        origin: PUBLIC,
      },
      body: new URLSearchParams({ csrf: token, username: 'ada', password: 'ada-demo-password' }).toString(),
    });
    expect(signIn.status).toBe(303);
    expect(cookiesOf(signIn).find((c) => c.startsWith('__Host-svc_session='))).toMatch(
      /HttpOnly; SameSite=Lax; Max-Age=\d+; Secure$/,
    );
  });

  it('a form sent without the CSRF cookie says that the page needs cookies; a stale token says to reload', async () => {
    // A browser that keeps no cookies for the site (blocked, or an app's embedded browser that drops them) would be
    // told to reload for ever: reloading sets a cookie it never sends back.
    const token = cookiesOf(await fetch(`${origin}/sign-in`))[0]!
      .split(';')[0]!
      .split('=')[1]!;
    const post = (cookie: string | undefined) =>
      fetch(`${origin}/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': 'application/x-www-form-urlencoded',
          origin: PUBLIC,
          ...(cookie ? { cookie } : {}),
        },
        body: new URLSearchParams({ csrf: token, username: 'ada', password: 'ada-demo-password' }).toString(),
      });
    const without = await post(undefined);
    expect(without.status).toBe(403);
    expect(textOf(await without.text())).toContain(
      'This browser sent the form without the cookie its page set: the page was open for more than 24 hours, ' +
        'or the browser keeps no cookies for this site. Go back, reload the page and try again, with cookies allowed.',
    );
    const stale = await post(`__Host-svc_csrf=${'x'.repeat(43)}`);
    expect(stale.status).toBe(403);
    const staleText = textOf(await stale.text());
    expect(staleText).toContain('The form has expired. Go back, reload the page and try again.');
    expect(staleText).not.toContain('cookie');
  });

  it('a form post from another origin is refused even with a valid CSRF token', async () => {
    const token = cookiesOf(await fetch(`${origin}/sign-in`))[0]!
      .split(';')[0]!
      .split('=')[1]!;
    const res = await fetch(`${origin}/sign-in`, {
      method: 'POST',
      redirect: 'manual',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        cookie: `__Host-svc_csrf=${token}`,
        origin: 'https://evil.example',
      },
      body: new URLSearchParams({ csrf: token, username: 'ada', password: 'ada-demo-password' }).toString(),
    });
    expect(res.status).toBe(403);
  });

  it('sign-in on the page is rate limited per username after failures (429 with Retry-After)', async () => {
    const token = cookiesOf(await fetch(`${origin}/sign-in`))[0]!
      .split(';')[0]!
      .split('=')[1]!;
    const attempt = (password: string) =>
      fetch(`${origin}/sign-in`, {
        method: 'POST',
        redirect: 'manual',
        headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `__Host-svc_csrf=${token}` },
        body: new URLSearchParams({ csrf: token, username: 'grace', password }).toString(),
      });
    expect((await attempt('wrong-1')).status).toBe(401);
    expect((await attempt('wrong-2')).status).toBe(401);
    const limited = await attempt('grace-demo-password');
    expect(limited.status).toBe(429);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(await limited.text()).toMatch(/Too many sign-in attempts/);
  });

  it('the issuer is the public https URL in metadata and iss', async () => {
    const meta = (await (await fetch(`${origin}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      string
    >;
    expect(meta['issuer']).toBe(PUBLIC);
    expect(meta['token_endpoint']).toBe(`${PUBLIC}/oauth/token`);
  });

  it('client authentication with HTTP Basic → 401 invalid_client with a Basic challenge (RFC 6749 §5.2)', async () => {
    const res = await fetch(`${origin}/oauth/token`, {
      method: 'POST',
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        authorization: `Basic ${Buffer.from('a:b').toString('base64')}`,
      },
      body: 'grant_type=authorization_code&code=x',
    });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Basic realm="${PUBLIC}"`);
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('a malformed cookie of another site (_ga=GA1.1.100%) does not break any page', async () => {
    for (const path of ['/sign-in', '/dashboard', '/sign-in?next=%2Fdashboard', '/oauth2/auth?client_id=x']) {
      const res = await fetch(`${origin}${path}`, {
        redirect: 'manual',
        headers: { cookie: '_ga=GA1.1.100%; other=%E0%A4%A; svc_session=%%%' },
      });
      expect(res.status, path).toBeLessThan(500);
    }
  });

  it('a next with a control character or a character above U+00FF does not break the sign-in page', async () => {
    for (const next of ['/dash%01board', '/%E2%98%83', '/%0D%0ASet-Cookie:%20x=y']) {
      const res = await fetch(`${origin}/sign-in?next=${next}`, { redirect: 'manual' });
      expect(res.status, next).toBe(200);
      expect(res.headers.get('set-cookie') ?? '').not.toContain('x=y');
    }
  });
});
