import { createHash, randomBytes } from 'node:crypto';
import type { Client } from '@modelcontextprotocol/client';
import type { TestServer } from '../helpers/harness.js';
import { unescapeHtml } from '../helpers/page-text.js';
import { connectClient, MODERN } from '../helpers/mcp.js';
import { claimsOf } from '../helpers/tokens.js';

/** A minimal cookie-keeping HTTP client that does not follow redirects: a browser without JavaScript. */
export class Browser {
  readonly cookies = new Map<string, string>();
  constructor(readonly base: string) {}

  async request(path: string, init: RequestInit = {}): Promise<Response> {
    const url = path.startsWith('http') ? path : `${this.base}${path}`;
    const headers = new Headers(init.headers);
    if (this.cookies.size) headers.set('cookie', [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; '));
    const res = await fetch(url, { ...init, headers, redirect: 'manual' });
    for (const c of res.headers.getSetCookie()) {
      const [pair = ''] = c.split(';');
      const i = pair.indexOf('=');
      const k = pair.slice(0, i);
      const v = pair.slice(i + 1);
      if (/Max-Age=0/i.test(c)) this.cookies.delete(k);
      else this.cookies.set(k, v);
    }
    return res;
  }

  get(path: string) {
    return this.request(path);
  }

  post(
    path: string,
    form: Record<string, string | string[]> | URLSearchParams,
    headers: Record<string, string> = {},
  ) {
    const body = form instanceof URLSearchParams ? form : new URLSearchParams();
    if (!(form instanceof URLSearchParams)) {
      for (const [k, v] of Object.entries(form))
        for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
    }
    return this.request(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
      body: body.toString(),
    });
  }

  /** The CSRF token the pages put in their forms. */
  get csrf(): string {
    return this.cookies.get('svc_csrf') ?? '';
  }

  async signIn(username = 'ada', password = `${username}-demo-password`): Promise<void> {
    await this.get('/sign-in');
    const res = await this.post('/sign-in', { csrf: this.csrf, username, password, next: '/dashboard' });
    if (res.status !== 303) throw new Error(`sign-in failed: ${res.status} ${await res.text()}`);
  }
}

export function pkce() {
  const verifier = randomBytes(32).toString('base64url');
  const challenge = createHash('sha256').update(verifier).digest('base64url');
  return { verifier, challenge };
}

export interface FlowOptions {
  clientId: string;
  redirectUri: string;
  resource?: string | undefined;
  scope?: string | undefined;
  state?: string;
  agency?: string;
  ceiling?: string[];
  /** Leave "stay connected" ticked, as a browser submits it (offered when offline_access was not asked for). */
  stayConnected?: boolean;
  username?: string;
  extra?: Record<string, string>;
}

/** The query of an authorization request. */
export function authorizeQuery(server: TestServer, o: FlowOptions, challenge: string): URLSearchParams {
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: o.clientId,
    redirect_uri: o.redirectUri,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state: o.state ?? 'st-123',
  });
  const resource = 'resource' in o ? o.resource : `${server.url.agencyMcp}/mcp`;
  if (resource !== undefined) q.set('resource', resource);
  if (o.scope !== undefined) q.set('scope', o.scope);
  for (const [k, v] of Object.entries(o.extra ?? {})) q.set(k, v);
  return q;
}

/** Extracts a hidden input's value from a page. */
export function hidden(page: string, name: string): string {
  const m = new RegExp(`name="${name}" value="([^"]*)"`).exec(page);
  if (!m) throw new Error(`no hidden ${name} in page`);
  return unescapeHtml(m[1]!);
}

/** Agency ids by name. */
export async function agencyIds(server: TestServer): Promise<Record<string, string>> {
  const rows = await server.services.ctx.db.selectFrom('agencies').select(['id', 'name']).execute();
  return Object.fromEntries(rows.map((r) => [r.name, r.id]));
}

/**
 * Runs the authorization endpoint and the pages over HTTP as a browser would, and returns the redirect back to the
 * client (a URL with code or error).
 */
export async function authorize(
  server: TestServer,
  browser: Browser,
  o: FlowOptions,
  challenge: string,
  decision: 'allow' | 'deny' = 'allow',
): Promise<URL> {
  if (!browser.cookies.has('svc_session')) await browser.signIn(o.username ?? 'ada');
  const q = authorizeQuery(server, o, challenge);
  let res = await browser.get(`/oauth2/auth?${q}`);
  if (res.status === 302 && res.headers.get('location')!.startsWith('/sign-in')) {
    // The browser session ended (tests move the clock): sign in again, as a person would.
    await browser.signIn(o.username ?? 'ada');
    res = await browser.get(`/oauth2/auth?${q}`);
  }
  if (res.status === 302) return new URL(res.headers.get('location')!);
  if (res.status !== 200) throw new Error(`authorize: ${res.status} ${await res.text()}`);
  let page = await res.text();
  if (page.includes('name="agency_id" value="') && page.includes('type="radio"')) {
    const agencies = await agencyIds(server);
    const agencyId = agencies[o.agency ?? 'Northwind Studio']!;
    res = await browser.get(
      `/oauth2/auth/consent?${new URLSearchParams({ request: hidden(page, 'request'), agency_id: agencyId })}`,
    );
    if (res.status === 302) return new URL(res.headers.get('location')!);
    if (res.status !== 200) throw new Error(`consent page: ${res.status} ${await res.text()}`);
    page = await res.text();
  }
  const form = new URLSearchParams({ csrf: browser.csrf, request: hidden(page, 'request'), decision });
  if (page.includes('name="agency_id"')) form.set('agency_id', hidden(page, 'agency_id'));
  const offered = [...page.matchAll(/name="ceiling" value="([^"]+)"/g)].map((m) => m[1]!);
  for (const c of o.ceiling ?? offered) form.append('ceiling', c);
  if (page.includes('name="stay_connected" value="on" checked') && o.stayConnected === true)
    form.set('stay_connected', 'on');
  res = await browser.post('/oauth2/auth/consent', form);
  if (res.status !== 303) throw new Error(`consent: ${res.status} ${await res.text()}`);
  return new URL(res.headers.get('location')!);
}

export async function token(
  server: TestServer,
  params: Record<string, string>,
  headers: Record<string, string> = {},
) {
  const res = await fetch(`${server.url.auth}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(params).toString(),
  });
  return { res, body: (await res.json()) as Record<string, string> };
}

export async function register(server: TestServer, metadata: Record<string, unknown>) {
  const res = await fetch(`${server.url.auth}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(metadata),
  });
  return { res, body: (await res.json()) as Record<string, unknown> };
}

/** Registers a public client and runs the whole flow to tokens. */
export async function connect(
  server: TestServer,
  o: Partial<FlowOptions> & { browser?: Browser } = {},
): Promise<{ clientId: string; tokens: Record<string, string>; browser: Browser; redirectUri: string }> {
  const redirectUri = o.redirectUri ?? 'http://127.0.0.1:9999/callback';
  const clientId =
    o.clientId ??
    ((await register(server, { redirect_uris: [redirectUri], client_name: 'Test agent' })).body[
      'client_id'
    ] as string);
  const browser = o.browser ?? new Browser(server.url.auth);
  const { verifier, challenge } = pkce();
  const back = await authorize(
    server,
    browser,
    { scope: 'agency:mcp:read offline_access', ...o, clientId, redirectUri },
    challenge,
  );
  const code = back.searchParams.get('code');
  if (!code) throw new Error(`no code: ${back}`);
  const { res, body } = await token(server, {
    grant_type: 'authorization_code',
    code,
    code_verifier: verifier,
    redirect_uri: redirectUri,
    client_id: clientId,
  });
  if (res.status !== 200) throw new Error(`token: ${res.status} ${JSON.stringify(body)}`);
  return { clientId, tokens: body, browser, redirectUri };
}

export async function connectionStatus(server: TestServer, accessToken: string) {
  const cid = claimsOf(accessToken)['cid'] as string;
  const row = await server.services.ctx.db
    .selectFrom('connections')
    .selectAll()
    .where('id', '=', cid)
    .executeTakeFirstOrThrow();
  return row;
}

/** Whether an agency MCP tool call (`list_clients`, through the real SDK client) works with this access token. */
export async function agencyToolCallWorks(server: TestServer, accessToken: string): Promise<boolean> {
  let client: Client | undefined;
  try {
    client = await connectClient(`${server.url.agencyMcp}/mcp`, accessToken, MODERN);
    return (await client.callTool({ name: 'list_clients', arguments: {} })).isError !== true;
  } catch {
    return false;
  } finally {
    await client?.close().catch(() => {});
  }
}
