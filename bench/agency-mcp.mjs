// Agency MCP server (issue 5): tools/call list_clients on the 2026-07-28 and 2025-11-25 wires with an OAuth access
// token from the real flow (the dashboard API token exchange cached, embedded database), beside the SDK's plain
// createMcpHandler serving one trivial tool with no auth (the same baseline as bench/mcp.mjs), in the same run.
// Target (issue 5): ≥ 1.5× the baseline's req/s with p99 ≤ 15 ms at 50 connections.
// Standalone: `npm run build && node bench/agency-mcp.mjs`.
import { createHash, randomBytes } from 'node:crypto';
import { MODERN, measure, printTable, spawnServer, startSvc, toolsCall } from './lib.mjs';

const LEGACY = '2025-11-25';
const BASELINE = `SDK createMcpHandler, trivial tool, no auth, ${MODERN} (baseline)`;
const REDIRECT = 'http://127.0.0.1:9/callback';

/** Registers a client, signs in on the pages as grace, consents with every offered permission, and returns the token. */
export async function agencyAccessToken(auth, resource) {
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
  const form = (path, body) =>
    req(path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: body.toString(),
    });
  const reg = await fetch(`${auth}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ redirect_uris: [REDIRECT], client_name: 'agency bench' }),
  });
  const clientId = (await reg.json()).client_id;
  await req('/sign-in');
  const csrf = () => cookies.get('svc_csrf');
  const signIn = { csrf: csrf(), username: 'grace', password: 'grace-demo-password', next: '/dashboard' };
  await form('/sign-in', new URLSearchParams(signIn));
  const verifier = randomBytes(32).toString('base64url');
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    resource,
    scope: 'agency:mcp:read',
  });
  const page = await (await req(`/oauth2/auth?${q}`)).text();
  const hidden = (name) =>
    [...page.matchAll(/name="(\w+)" value="([^"]*)"/g)]
      .find((m) => m[1] === name)?.[2]
      .replace(/&amp;/g, '&');
  const fields = new URLSearchParams({
    csrf: csrf(),
    request: hidden('request'),
    agency_id: hidden('agency_id'),
    decision: 'allow',
  });
  for (const m of page.matchAll(/name="ceiling" value="([^"]+)"/g)) fields.append('ceiling', m[1]);
  const back = await form('/oauth2/auth/consent', fields);
  const code = new URL(back.headers.get('location')).searchParams.get('code');
  if (!code) throw new Error(`no code: ${back.status} ${back.headers.get('location')}`);
  const res = await fetch(`${auth}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: clientId,
    }).toString(),
  });
  const body = await res.json();
  if (res.status !== 200) throw new Error(`token endpoint answered ${res.status}: ${JSON.stringify(body)}`);
  return body.access_token;
}

export async function run({ seconds = 5 } = {}) {
  const rows = [];
  const baseline = await spawnServer(['bench/mcp-baseline-server.mjs'], { ready: /baseline (http:\/\/\S+)/ });
  try {
    rows.push(
      await measure(BASELINE, {
        url: baseline.match[1],
        pid: baseline.pid,
        seconds,
        ...toolsCall(MODERN, 'ping'),
      }),
    );
  } finally {
    await baseline.stop();
  }
  const svc = await startSvc({ only: 'agency-mcp,auth', env: { DCR_LIMIT_PER_IP: '100000' } });
  try {
    const url = `${svc.urls['agency-mcp']}/mcp`;
    const auth = { authorization: `Bearer ${await agencyAccessToken(svc.urls.auth, url)}` };
    for (const wire of [MODERN, LEGACY]) {
      const name = `agency MCP tools/call list_clients, ${wire}`;
      rows.push(
        await measure(name, { url, pid: svc.pid, seconds, ...toolsCall(wire, 'list_clients', auth) }),
      );
    }
  } finally {
    await svc.stop();
  }
  printTable('Agency MCP server, 50 connections', rows, BASELINE);
  for (const r of rows.slice(1)) {
    const ratio = (r.reqPerSec / rows[0].reqPerSec).toFixed(2);
    const verdict = r.reqPerSec >= 1.5 * rows[0].reqPerSec && r.p99 <= 15 ? 'meets' : 'MISSES';
    console.log(
      `${r.name}: ${ratio}× baseline req/s, p99 ${r.p99} ms — ${verdict} the target (≥ 1.5×, p99 ≤ 15 ms)`,
    );
  }
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`)
  await run({ seconds: Number(process.env.BENCH_SECONDS ?? 5) });
