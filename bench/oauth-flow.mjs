// The OAuth flow as a person and an agent do it, for benchmarks that need real tokens: dynamic registration, sign-in
// on the pages, consent, and the code exchange with PKCE.
import { createHash, randomBytes } from 'node:crypto';

const REDIRECT = 'http://127.0.0.1:9/callback';

/** A form client that keeps cookies, as a browser would, and never follows redirects. */
export function pageClient(auth) {
  const cookies = new Map();
  const req = async (path, init = {}) => {
    const headers = new Headers(init.headers);
    if (cookies.size) headers.set('cookie', [...cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(`${auth}${path}`, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair.indexOf('=');
      cookies.set(pair.slice(0, i), pair.slice(i + 1));
    }
    return res;
  };
  const form = (path, fields) =>
    req(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    });
  const cookieHeader = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  return { req, form, csrf: () => cookies.get('svc_csrf'), cookieHeader };
}

/**
 * Registers a new public client, signs grace in, consents (every offered permission, or the `ceiling` given) and
 * exchanges the code. Returns the client id and the token response.
 */
export async function connectAgent(auth, resource, { scope = 'agency:mcp:read', ceiling } = {}) {
  const reg = await fetch(`${auth}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    // A distinct name per call: registration is idempotent, and each caller wants its own client.
    body: JSON.stringify({
      redirect_uris: [REDIRECT],
      client_name: `bench ${randomBytes(4).toString('hex')}`,
    }),
  });
  const clientId = (await reg.json()).client_id;
  const browser = pageClient(auth);
  await browser.req('/sign-in');
  await browser.form('/sign-in', {
    csrf: browser.csrf(),
    username: 'grace',
    password: 'grace-demo-password',
    next: '/dashboard',
  });
  const verifier = randomBytes(32).toString('base64url');
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    resource,
    scope,
  });
  const page = await (await browser.req(`/oauth2/auth?${query}`)).text();
  const hidden = (name) =>
    [...page.matchAll(/name="(\w+)" value="([^"]*)"/g)]
      .find((m) => m[1] === name)?.[2]
      .replace(/&amp;/g, '&');
  const fields = new URLSearchParams({
    csrf: browser.csrf(),
    request: hidden('request'),
    agency_id: hidden('agency_id'),
    decision: 'allow',
  });
  const offered = [...page.matchAll(/name="ceiling" value="([^"]+)"/g)].map((m) => m[1]);
  for (const permission of ceiling ?? offered) fields.append('ceiling', permission);
  const back = await browser.form('/oauth2/auth/consent', fields);
  const code = new URL(back.headers.get('location')).searchParams.get('code');
  if (!code) throw new Error(`no code: ${back.status} ${back.headers.get('location')}`);
  const tokens = await tokenRequest(auth, {
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    redirect_uri: REDIRECT,
    client_id: clientId,
  });
  return { clientId, tokens };
}

/** POST to the token endpoint (this service's path unless `path` says otherwise); throws unless it answers 200. */
export async function tokenRequest(auth, params, path = '/oauth/token') {
  const res = await fetch(`${auth}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(params).toString(),
  });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  return body;
}
