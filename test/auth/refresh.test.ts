import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomBytes } from 'node:crypto';
import { hashSecret } from '../../src/base/secrets.js';
import { boundPort } from '../../src/config/config.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { holdRefreshTokenRows } from '../helpers/rows.js';
import {
  agencyIds,
  agencyToolCallWorks,
  authorizeQuery,
  Browser,
  connect,
  connectionStatus,
  hidden,
  pkce,
  register,
  token,
} from './oauth-helpers.js';

/**
 * The refresh grant as real MCP hosts use it: several tool calls fail with 401 at once and each runs the refresh
 * with the same token; a host whose response was lost retries; a host re-authorizes for write after a 403 or on a
 * second device. Every case runs over HTTP against real servers.
 */

const REDIRECT = 'http://127.0.0.1:9999/callback';
let server: TestServer;
let clientId: string;
let ada: Browser;

beforeAll(async () => {
  server = await startTestServer({ env: { DCR_LIMIT_PER_IP: '1000' } });
  clientId = (await register(server, { redirect_uris: [REDIRECT], client_name: 'Host' })).body[
    'client_id'
  ] as string;
  ada = new Browser(server.url.auth);
});
afterAll(() => server?.close());

const refreshAt = (at: TestServer, rt: string, extra: Record<string, string> = {}) =>
  token(at, { grant_type: 'refresh_token', refresh_token: rt, client_id: clientId, ...extra });
const refresh = (rt: string) => refreshAt(server, rt);
const connectHost = (scope = 'agency:mcp:read offline_access', browser = ada) =>
  connect(server, { clientId, redirectUri: REDIRECT, browser, scope });

async function auditTypes(connectionId: string): Promise<string[]> {
  const rows = await server.services.ctx.db
    .selectFrom('audit_events')
    .select('type')
    .where('connection_id', '=', connectionId)
    .execute();
  return rows.map((r) => r.type);
}

describe(`parallel and retried refreshes keep the connection (${ENGINE})`, () => {
  it('5 parallel refreshes of one token: all succeed, and the connection goes on working', async () => {
    const { tokens } = await connectHost();
    const burst = await Promise.all(Array.from({ length: 5 }, () => refresh(tokens['refresh_token']!)));
    expect(burst.map((r) => r.res.status)).toEqual([200, 200, 200, 200, 200]);
    // Single use under the race: one rotation won, and every other request got its successor again (the reuse
    // window), never a second successor of the same token.
    expect(new Set(burst.map((r) => r.body['refresh_token'])).size).toBe(1);
    // Whichever answer the host keeps, its tokens work: every answer carries a working access token and a
    // refresh token that rotates once more.
    for (const r of burst) expect(await agencyToolCallWorks(server, r.body['access_token']!)).toBe(true);
    const last = burst[burst.length - 1]!.body;
    const next = await refresh(last['refresh_token']!);
    expect(next.res.status).toBe(200);
    expect(await agencyToolCallWorks(server, next.body['access_token']!)).toBe(true);
    expect((await connectionStatus(server, next.body['access_token']!)).status).toBe('active');
  });

  it('a retry 2 s later (the first answer was lost) gets a working successor', async () => {
    const { tokens } = await connectHost();
    const lost = await refresh(tokens['refresh_token']!);
    expect(lost.res.status).toBe(200);
    server.clock.advance(2000);
    const retry = await refresh(tokens['refresh_token']!);
    expect(retry.res.status).toBe(200);
    expect(await agencyToolCallWorks(server, retry.body['access_token']!)).toBe(true);
    const next = await refresh(retry.body['refresh_token']!);
    expect(next.res.status).toBe(200);
  });

  it('a replay after the window revokes the whole connection, with an audit event', async () => {
    const { tokens } = await connectHost();
    const rotated = await refresh(tokens['refresh_token']!);
    const connectionId = (await connectionStatus(server, rotated.body['access_token']!)).id;
    server.clock.advance((server.config.oauth.refreshReuseGraceSeconds + 1) * 1000);
    const replay = await refresh(tokens['refresh_token']!);
    expect(replay.res.status).toBe(400);
    expect(replay.body['error']).toBe('invalid_grant');
    const row = await connectionStatus(server, rotated.body['access_token']!);
    expect([row.status, row.revoke_reason]).toEqual(['revoked', 'refresh_reuse']);
    expect(await auditTypes(connectionId)).toContain('connection.refresh_reuse_detected');
    // Nothing handed out under the connection works any more.
    expect((await refresh(rotated.body['refresh_token']!)).body['error']).toBe('invalid_grant');
  });

  it('a token older than the immediately previous one revokes, even inside the window', async () => {
    const { tokens } = await connectHost();
    const first = await refresh(tokens['refresh_token']!);
    const second = await refresh(first.body['refresh_token']!);
    expect(second.res.status).toBe(200);
    const stale = await refresh(tokens['refresh_token']!);
    expect(stale.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, second.body['access_token']!)).revoke_reason).toBe(
      'refresh_reuse',
    );
  });

  it('another client presenting the token within the window gets nothing and ends nothing', async () => {
    const { tokens } = await connectHost();
    const rotated = await refresh(tokens['refresh_token']!);
    const other = await token(server, {
      grant_type: 'refresh_token',
      refresh_token: tokens['refresh_token']!,
      client_id: 'claude-code',
    });
    expect(other.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, rotated.body['access_token']!)).status).toBe('active');
  });
});

describe(`a refused refresh writes nothing, whichever check refuses it (${ENGINE})`, () => {
  // On PostgreSQL the rotation's statement makes part of the grant's checks itself (domain/refresh-tokens.ts
  // RotationGuard): a check it made looser than the grant would consume the token and answer 500 here.
  const sha256 = (s: string) => createHash('sha256').update(s).digest('base64url');
  const db = () => server.services.ctx.db;
  const rowOf = (rt: string) =>
    db()
      .selectFrom('refresh_tokens')
      .select(['rotated_at', 'connection_id', 'expires_at'])
      .where('hash', '=', sha256(rt))
      .executeTakeFirstOrThrow();
  type ConnectionChange = { scopes?: string; status?: 'active' | 'revoked'; resource?: string };
  const setConnection = async (rt: string, set: ConnectionChange) =>
    db()
      .updateTable('connections')
      .set(set)
      .where('id', '=', (await rowOf(rt)).connection_id)
      .execute();
  const resource = () => `${server.url.agencyMcp}/mcp`;
  /** The refresh grant with `extra` parameters (repeated ones included), as a host sends it. */
  async function refreshWith(rt: string, extra: [string, string][]) {
    const form = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: rt, client_id: clientId });
    for (const [k, v] of extra) form.set(k, v);
    for (const [k, v] of extra.filter(([k]) => k === 'resource').slice(1)) form.append(k, v);
    const res = await fetch(`${server.url.auth}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: form.toString(),
    });
    return { res, body: (await res.json()) as Record<string, string> };
  }

  /** [case, extra parameters, expected error, a change made before (and what undoes it)]. */
  const nothing = async () => async () => {};
  /** Sets the token's connection to `set` before, and back to `back` after. */
  const changing = (set: ConnectionChange, back: ConnectionChange) => async (rt: string) => {
    await setConnection(rt, set);
    return () => setConnection(rt, back);
  };
  const cases: [string, () => [string, string][], string, (rt: string) => Promise<() => Promise<unknown>>][] =
    [
      ['another client', () => [['client_id', 'claude-code']], 'invalid_grant', nothing],
      // Hostile spellings are refused as such before any statement sees them (PostgreSQL refuses a NUL in text).
      ['a client_id with a NUL', () => [['client_id', `${clientId}\u0000`]], 'invalid_request', nothing],
      ['a resource with a NUL', () => [['resource', `${resource()}\u0000`]], 'invalid_target', nothing],
      ['a resource with a space', () => [['resource', `${resource()} x`]], 'invalid_target', nothing],
      ['a resource of another server', () => [['resource', server.url.api]], 'invalid_target', nothing],
      [
        'two resources',
        () => [
          ['resource', resource()],
          ['resource', resource()],
        ],
        'invalid_target',
        nothing,
      ],
      ['a wider scope', () => [['scope', 'agency:mcp:write']], 'invalid_scope', nothing],
      [
        "a connection narrowed to none of the token's scope",
        () => [],
        'invalid_grant',
        changing({ scopes: 'agency:mcp:write' }, { scopes: 'agency:mcp:read offline_access' }),
      ],
      [
        'a connection that no longer grants offline_access (a newer consent without "Stay connected")',
        () => [],
        'invalid_grant',
        changing({ scopes: 'agency:mcp:read' }, { scopes: 'agency:mcp:read offline_access' }),
      ],
      [
        'a revoked connection',
        () => [],
        'invalid_grant',
        changing({ status: 'revoked' }, { status: 'active' }),
      ],
      [
        'an expired token',
        () => [],
        'invalid_grant',
        async (rt) => {
          const { expires_at } = await rowOf(rt);
          const set = (at: number) =>
            db()
              .updateTable('refresh_tokens')
              .set({ expires_at: at })
              .where('hash', '=', sha256(rt))
              .execute();
          await set(server.clock.now());
          return () => set(expires_at);
        },
      ],
    ];
  it.each(cases)(
    '%s: the error, the token unused, and it rotates once the cause is gone',
    async (_, extra, error, change) => {
      const { tokens } = await connectHost();
      const rt = tokens['refresh_token']!;
      const undo = await change(rt);
      const refused = await refreshWith(rt, extra());
      expect([refused.res.status, refused.body['error']]).toEqual([400, error]);
      expect((await rowOf(rt)).rotated_at).toBeNull();
      await undo();
      const rotated = await refreshAt(server, rt, { resource: resource() });
      expect(rotated.res.status).toBe(200);
    },
  );

  it('a grant whose resource is stored in another form (an upper-case scheme) still rotates with the canonical one', async () => {
    const { tokens } = await connectHost();
    const rt = tokens['refresh_token']!;
    await setConnection(rt, { resource: resource().replace(/^http:/, 'HTTP:') });
    const rotated = await refreshAt(server, rt, { resource: resource() });
    expect(rotated.res.status).toBe(200);
    expect((await rowOf(rt)).rotated_at).not.toBeNull();
    await setConnection(rt, { resource: resource() });
  });
});

describe(`two instances sharing one database (${ENGINE})`, () => {
  let peer: TestServer;
  beforeAll(async () => {
    // Behind a load balancer both instances publish the same URLs: one issuer, one resource.
    const shared = await startTestServer({
      sharing: server,
      env: { DCR_LIMIT_PER_IP: '1000', AUTH_URL: server.url.auth, AGENCY_MCP_URL: server.url.agencyMcp },
    });
    const local = (surface: 'auth' | 'agency-mcp') => `http://127.0.0.1:${boundPort(shared.config, surface)}`;
    peer = { ...shared, url: { ...shared.url, auth: local('auth'), agencyMcp: local('agency-mcp') } };
  });
  afterAll(() => peer?.close());

  it('a burst split across both instances: every refresh succeeds and the connection stays usable on both', async () => {
    const { tokens } = await connectHost();
    const instances = [server, peer, server, peer, server];
    const burst = await Promise.all(instances.map((at) => refreshAt(at, tokens['refresh_token']!)));
    expect(burst.map((r) => r.res.status)).toEqual([200, 200, 200, 200, 200]);
    expect(new Set(burst.map((r) => r.body['refresh_token'])).size).toBe(1);
    const next = await refreshAt(peer, burst[0]!.body['refresh_token']!);
    expect(next.res.status).toBe(200);
    expect(await agencyToolCallWorks(server, next.body['access_token']!)).toBe(true);
    expect(await agencyToolCallWorks(peer, next.body['access_token']!)).toBe(true);
  });
});

describe(`one connection per app (${ENGINE})`, () => {
  const activeConnections = () =>
    server.services.ctx.db
      .selectFrom('connections')
      .select(['id', 'scopes'])
      .where('client_id', '=', clientId)
      .where('status', '=', 'active')
      .execute();

  it('a step-up re-authorization updates the one connection; the newest consent governs', async () => {
    const read = await connectHost();
    const before = await connectionStatus(server, read.tokens['access_token']!);
    const write = await connectHost('agency:mcp:read agency:mcp:write offline_access');
    const after = await connectionStatus(server, write.tokens['access_token']!);
    expect(after.id).toBe(before.id);
    expect(after.scopes.split(' ')).toContain('agency:mcp:write');
    expect(await activeConnections()).toHaveLength(1);
    // The earlier token family lives on under the same connection (the host may still hold it).
    const old = await refresh(read.tokens['refresh_token']!);
    expect(old.res.status).toBe(200);
    expect(old.body['scope']).toBe('agency:mcp:read offline_access');
  });

  it('a second device authorizing the same app does not disconnect the first; Disconnect ends both', async () => {
    const laptop = await connectHost();
    const phone = await connectHost('agency:mcp:read offline_access', new Browser(server.url.auth));
    expect((await connectionStatus(server, phone.tokens['access_token']!)).id).toBe(
      (await connectionStatus(server, laptop.tokens['access_token']!)).id,
    );
    const laptopNext = await refresh(laptop.tokens['refresh_token']!);
    expect(laptopNext.res.status).toBe(200);
    expect(await agencyToolCallWorks(server, laptopNext.body['access_token']!)).toBe(true);
    const [connection] = await activeConnections();
    expect(connection).toBeDefined();
    // The member disconnects the app on the dashboard.
    await ada.get('/dashboard');
    const res = await ada.post(`/dashboard/connections/${connection!.id}/disconnect`, { csrf: ada.csrf });
    expect(res.status).toBe(303);
    expect((await refresh(laptopNext.body['refresh_token']!)).body['error']).toBe('invalid_grant');
    expect((await refresh(phone.tokens['refresh_token']!)).body['error']).toBe('invalid_grant');
    expect(await agencyToolCallWorks(server, phone.tokens['access_token']!)).toBe(false);
  });
});

describe(`hosts that never ask for offline_access (${ENGINE})`, () => {
  /** The host asks for read access only; the member keeps "Stay connected" ticked, or unticks it. */
  const authorize = (stayConnected: boolean) =>
    connect(server, {
      clientId,
      redirectUri: REDIRECT,
      browser: ada,
      scope: 'agency:mcp:read',
      stayConnected,
    });

  it('consent offers "stay connected", ticked; kept, the token response carries a refresh token and says so in scope', async () => {
    const { tokens } = await authorize(true);
    expect(tokens['scope']).toBe('agency:mcp:read offline_access');
    expect(tokens['refresh_token']).toBeTruthy();
    expect((await refresh(tokens['refresh_token']!)).res.status).toBe(200);
  });
  it('unticked, the host gets a 1-hour access token only, with the scope it asked for', async () => {
    const { tokens } = await authorize(false);
    expect(tokens['scope']).toBe('agency:mcp:read');
    expect(tokens).not.toHaveProperty('refresh_token');
  });
  it('a newer consent with "stay connected" unticked governs the refresh tokens issued before it', async () => {
    // "What you allow here replaces what was allowed before" (the update consent page): a device's refresh tokens
    // from an earlier consent stop, and the app's access tokens go on until they expire.
    const first = await authorize(true);
    const again = await authorize(false);
    expect(again.tokens['scope']).toBe('agency:mcp:read');
    const refused = await refresh(first.tokens['refresh_token']!);
    expect([refused.res.status, refused.body]).toEqual([
      400,
      {
        error: 'invalid_grant',
        error_description:
          'The connection no longer allows staying connected (offline_access); authorize again',
      },
    ]);
    expect(await agencyToolCallWorks(server, again.tokens['access_token']!)).toBe(true);
    // Allowed again by the newest consent, the earlier device's token rotates.
    await authorize(true);
    expect((await refresh(first.tokens['refresh_token']!)).res.status).toBe(200);
  });
  it('a host that asks for offline_access is not asked again', async () => {
    const { verifier: _v, challenge } = pkce();
    const q = authorizeQuery(
      server,
      { clientId, redirectUri: REDIRECT, scope: 'agency:mcp:read offline_access' },
      challenge,
    );
    const first = await ada.get(`/oauth2/auth?${q}`);
    let page = await first.text();
    if (page.includes('type="radio"')) {
      const agencies = await agencyIds(server);
      page = await (
        await ada.get(
          `/oauth2/auth/consent?${new URLSearchParams({ request: hidden(page, 'request'), agency_id: agencies['Northwind Studio']! })}`,
        )
      ).text();
    }
    expect(page).toContain('name="ceiling"');
    expect(page).not.toContain('stay_connected');
  });
});

describe(`rotated tokens are pruned and their reuse is still detected (${ENGINE})`, () => {
  const HOUR = 3600_000;
  const sha256 = (s: string) => createHash('sha256').update(s).digest('base64url');
  /** The rows of the family of `refreshToken` (its tag is the part before the dot). */
  const familyRows = (refreshToken: string) =>
    server.services.ctx.db
      .selectFrom('refresh_tokens')
      .select(['hash', 'rotated_at'])
      .where('family', '=', sha256(refreshToken.split('.')[0]!))
      .execute();
  /** Past the reuse window, then one more rotation, from `live`. */
  async function pruneAfterwards(live: string): Promise<Record<string, string>> {
    server.clock.advance((server.config.oauth.refreshReuseGraceSeconds + 1) * 1000);
    const next = await refresh(live);
    expect(next.res.status).toBe(200);
    return next.body;
  }

  it('a family keeps two rows however often it rotates: the live token and the immediately previous one', async () => {
    const { tokens } = await connectHost();
    let live = tokens['refresh_token']!;
    for (let i = 0; i < 12; i++) {
      live = (await refresh(live)).body['refresh_token']!;
      const rows = await familyRows(live);
      expect(rows.length).toBe(2);
      expect(rows.filter((r) => r.rotated_at === null).map((r) => r.hash)).toEqual([sha256(live)]);
    }
    server.clock.advance(3 * HOUR);
    expect((await refresh(live)).res.status).toBe(200);
  });

  it('a token rotated long ago, its row pruned, is recognised as reused: the connection is revoked', async () => {
    const { tokens } = await connectHost();
    const first = tokens['refresh_token']!;
    const second = (await refresh(first)).body['refresh_token']!;
    const latest = await pruneAfterwards(second);
    const connectionId = (await connectionStatus(server, latest['access_token']!)).id;
    expect((await familyRows(first)).map((r) => r.hash)).not.toContain(sha256(first));
    const replay = await refresh(first);
    expect(replay.body['error']).toBe('invalid_grant');
    const row = await connectionStatus(server, latest['access_token']!);
    expect([row.status, row.revoke_reason]).toEqual(['revoked', 'refresh_reuse']);
    expect(await auditTypes(connectionId)).toContain('connection.refresh_reuse_detected');
    expect((await refresh(latest['refresh_token']!)).body['error']).toBe('invalid_grant');
  });

  it('another client presenting a pruned token of the family gets nothing and ends nothing', async () => {
    const { tokens } = await connectHost();
    const first = tokens['refresh_token']!;
    const latest = await pruneAfterwards((await refresh(first)).body['refresh_token']!);
    const other = await token(server, {
      grant_type: 'refresh_token',
      refresh_token: first,
      client_id: 'claude-code',
    });
    expect(other.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, latest['access_token']!)).status).toBe('active');
  });

  it('revoking with a pruned token of the family ends the connection (RFC 7009 §2.1)', async () => {
    const { tokens } = await connectHost();
    const first = tokens['refresh_token']!;
    const latest = await pruneAfterwards((await refresh(first)).body['refresh_token']!);
    const res = await fetch(`${server.url.auth}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: first, client_id: clientId }).toString(),
    });
    expect(res.status).toBe(200);
    expect((await connectionStatus(server, latest['access_token']!)).revoke_reason).toBe('revoked_by_client');
  });

  it('a token of an unknown family, or malformed, is only invalid', async () => {
    const { tokens } = await connectHost();
    const [tag, secret] = tokens['refresh_token']!.split('.');
    expect(tag).toHaveLength(22);
    expect(secret).toHaveLength(43);
    const forged = `${'A'.repeat(22)}.${secret}`;
    expect((await refresh(forged)).body['error']).toBe('invalid_grant');
    expect((await refresh(`${tag}.short`)).body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, tokens['access_token']!)).status).toBe('active');
  });

  it('a token issued before families is kept until it expires; rotating it starts a family', async () => {
    const { tokens } = await connectHost();
    const connectionId = (await connectionStatus(server, tokens['access_token']!)).id;
    const legacy = randomBytes(32).toString('base64url');
    await server.services.ctx.db
      .insertInto('refresh_tokens')
      .values({
        hash: sha256(legacy),
        connection_id: connectionId,
        parent_hash: null,
        successor_salt: randomBytes(16).toString('base64url'),
        scope: 'agency:mcp:read offline_access',
        issued_at: server.clock.now(),
        rotated_at: null,
        expires_at: server.clock.now() + 30 * 24 * HOUR,
      })
      .execute();
    const rotated = await refresh(legacy);
    expect(rotated.res.status).toBe(200);
    // Within the window a retry gets the same successor, now a token of a family.
    expect((await refresh(legacy)).body['refresh_token']).toBe(rotated.body['refresh_token']);
    expect(rotated.body['refresh_token']!.split('.')).toHaveLength(2);
    const latest = await pruneAfterwards(rotated.body['refresh_token']!);
    // Without a family its row is what detection needs: it stays until it expires.
    const kept = await server.services.ctx.db
      .selectFrom('refresh_tokens')
      .select('hash')
      .where('hash', '=', sha256(legacy))
      .execute();
    expect(kept).toHaveLength(1);
    const replay = await refresh(legacy);
    expect(replay.body['error']).toBe('invalid_grant');
    expect((await connectionStatus(server, latest['access_token']!)).revoke_reason).toBe('refresh_reuse');
  });
});

describe.runIf(ENGINE === 'postgres')('a refresh that waits too long for the database (postgres)', () => {
  let slow: TestServer;
  beforeAll(async () => {
    slow = await startTestServer({ env: { DCR_LIMIT_PER_IP: '1000', DATABASE_CONNECT_TIMEOUT_MS: '300' } });
  });
  afterAll(() => slow?.close());

  it('is answered 503 with Retry-After after DATABASE_CONNECT_TIMEOUT_MS, its token left as it was', async () => {
    const hosts = [];
    for (let i = 0; i < 3; i++) hosts.push(await connect(slow, { scope: 'agency:mcp:read offline_access' }));
    const [first, second, third] = hosts.map((h) => ({
      clientId: h.clientId,
      rt: h.tokens['refresh_token']!,
    }));
    const refreshOf = (h: { clientId: string; rt: string }) =>
      token(slow, { grant_type: 'refresh_token', refresh_token: h.rt, client_id: h.clientId });
    // Another session holds the rows of two tokens: both rotation statements of the process wait on them, one each
    // (each refresh is sent once the one before it waits, so that they do not share a statement).
    const lock = await holdRefreshTokenRows(
      slow.services.ctx.db,
      [first!, second!].map((h) => hashSecret(h.rt)),
    );
    try {
      const stuck = [refreshOf(first!)];
      await lock.waitForWaiters(1);
      stuck.push(refreshOf(second!));
      await lock.waitForWaiters(2);
      const waited = await refreshOf(third!);
      expect(waited.res.status).toBe(503);
      expect(waited.res.headers.get('retry-after')).toBe('5');
      expect(waited.body['error']).toBe('temporarily_unavailable');
      // The operator reads why, once: the database did not take the statement in time.
      const said = () => slow.logs.lines.filter((l) => l['msg'] === 'database unavailable');
      expect(said()).toEqual([
        expect.objectContaining({ reason: 'waited more than 300 ms for a database statement to start' }),
      ]);
      await lock.release();
      expect((await Promise.all(stuck)).map((r) => r.res.status)).toEqual([200, 200]);
      expect(slow.logs.lines.map((l) => l['msg'])).toContain('database available again');
      // Nothing of the refused refresh was written: its token still rotates.
      const again = await refreshOf(third!);
      expect(again.res.status).toBe(200);
    } finally {
      await lock.release();
    }
  });
});
