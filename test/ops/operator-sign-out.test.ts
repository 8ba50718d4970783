import { describe, expect, it } from 'vitest';
import { serverForCli, svc } from '../helpers/cli.js';
import { ENGINE, signIn } from '../helpers/harness.js';
import { modernRequest } from '../helpers/mcp.js';
import { grant } from '../agency-mcp/helpers.js';
import { Browser, connect, register, token } from '../auth/oauth-helpers.js';

/**
 * An account that may be compromised, at night: the operator ends everything it holds with the CLI, a process apart
 * from the instance serving (which it does not tell), over the database they share. The instance refuses every token
 * of the user within LIVENESS_CACHE_SECONDS; the password is set anew where it must be.
 */

const serving = serverForCli();

/** What `username` holds: an API session, a signed-in browser, an agency connection. */
async function everythingOf(username: string) {
  const api = await signIn(serving.server, username);
  const browser = new Browser(serving.server.url.auth);
  await browser.signIn(username);
  const connection = await grant(serving.server, { username });
  const agencyCall = () =>
    modernRequest(
      `${serving.server.url.agencyMcp}/mcp`,
      'tools/call',
      { name: 'get_agency', arguments: {} },
      {
        token: connection.token,
      },
    );
  return {
    me: () => fetch(`${serving.server.url.api}/me`, { headers: { authorization: `Bearer ${api.token}` } }),
    dashboard: () => browser.get('/dashboard'),
    agencyCall,
  };
}

/** Past the bound within which an instance may still take a token ended elsewhere. */
const pastTheLivenessBound = () =>
  serving.server.clock.advance(serving.server.config.livenessCacheSeconds * 1000 + 1);

describe(`svc users sign-out and set-password, with an instance serving (${ENGINE})`, () => {
  it("sign-out: the user's API session, browser session and agency connection are refused; others' are not", async () => {
    const ada = await everythingOf('ada');
    const grace = await everythingOf('grace');
    expect((await ada.me()).status).toBe(200);
    expect((await ada.dashboard()).status).toBe(200);
    expect((await ada.agencyCall()).status).toBe(200);

    const r = await svc('users', 'sign-out', '--username', 'Ada');
    expect(r).toEqual({
      code: 0,
      out: `ada: 2 sessions and 1 connection ended; every instance refuses their tokens within ${serving.server.config.livenessCacheSeconds} s`,
      err: '',
    });
    pastTheLivenessBound();
    expect((await ada.me()).status).toBe(401);
    expect((await ada.dashboard()).status).toBe(303);
    expect((await ada.agencyCall()).status).toBe(401);
    // Grace is untouched.
    expect((await grace.me()).status).toBe(200);
    expect((await grace.dashboard()).status).toBe(200);
    expect((await grace.agencyCall()).status).toBe(200);
    // The agency's history names who ended the connection.
    const [event] = await serving.server.services.ctx.db
      .selectFrom('audit_events')
      .select(['type', 'detail'])
      .where('type', '=', 'connection.revoked')
      .execute();
    expect(JSON.parse(event!.detail)).toMatchObject({ reason: 'ended_by_operator' });
    // Again: nothing left to end.
    expect((await svc('users', 'sign-out', '--username', 'ada')).out).toMatch(
      /^ada: 0 sessions and 0 connections/,
    );
  });

  it('set-password: the old password is refused, the new one signs in, and what the user held is ended', async () => {
    const linus = await everythingOf('linus');
    const r = await svc('users', 'set-password', '--username', 'linus', '--password', 'a-new-password-1');
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^linus: password set; 2 sessions and 1 connection ended/);
    pastTheLivenessBound();
    expect((await linus.me()).status).toBe(401);
    const attempt = (password: string) =>
      fetch(`${serving.server.url.auth}/api/sessions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ username: 'linus', password }),
      });
    expect((await attempt('linus-demo-password')).status).toBe(401);
    expect((await attempt('a-new-password-1')).status).toBe(201);
  });

  it('refuses an unknown user and a password out of bounds, ending nothing', async () => {
    expect(await svc('users', 'sign-out', '--username', 'nobody')).toMatchObject({ code: 2 });
    const grace = await everythingOf('grace');
    const short = await svc('users', 'set-password', '--username', 'grace', '--password', 'short');
    expect(short.code).not.toBe(0);
    expect(short.err).toMatch(/password must be 8 to 256 characters/);
    pastTheLivenessBound();
    expect((await grace.me()).status).toBe(200);
  });
});

describe(`svc clients disconnect, with an instance serving (${ENGINE})`, () => {
  it("ends every connection of one application, for every member; other applications' stay", async () => {
    const browsers = await Promise.all(
      ['ada', 'grace'].map(async (username) => {
        const browser = new Browser(serving.server.url.auth);
        await browser.signIn(username);
        return browser;
      }),
    );
    // A host whose token store was breached, connected by ada and by grace; and another application of grace's.
    const ada = await connect(serving.server, { browser: browsers[0] });
    const grace = await connect(serving.server, { browser: browsers[1], clientId: ada.clientId });
    const otherId = (
      await register(serving.server, {
        redirect_uris: ['http://127.0.0.1:9999/callback'],
        client_name: 'Planner Bot',
      })
    ).body['client_id'] as string;
    const other = await connect(serving.server, { browser: browsers[1], clientId: otherId });
    expect(otherId).not.toBe(ada.clientId);
    const call = (accessToken: string) =>
      modernRequest(
        `${serving.server.url.agencyMcp}/mcp`,
        'tools/call',
        { name: 'get_agency', arguments: {} },
        {
          token: accessToken,
        },
      ).then((r) => r.status);
    const refresh = (flow: typeof ada) =>
      token(serving.server, {
        grant_type: 'refresh_token',
        refresh_token: flow.tokens['refresh_token']!,
        client_id: flow.clientId,
      }).then((r) => r.res.status);
    for (const flow of [ada, grace, other]) expect(await call(flow.tokens['access_token']!)).toBe(200);

    // Which applications act for members now: the one to disconnect first, with its two users.
    const listed = async (...flags: string[]) => {
      const r = await svc('clients', 'list', ...flags);
      expect(r.code).toBe(0);
      return r.out
        .split('\n')
        .filter(Boolean)
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    };
    // (The file's other tests left connections of their own: this one's are picked out by id.)
    const before = await listed();
    const ids = before.map((c) => c['id']);
    expect(before[ids.indexOf(ada.clientId)]).toMatchObject({
      kind: 'dcr',
      name: 'Test agent',
      live_connections: 2,
      users: 2,
      last_used_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT/),
    });
    expect(before[ids.indexOf(otherId)]).toMatchObject({
      name: 'Planner Bot',
      live_connections: 1,
      users: 1,
    });
    // The most connected first: the whole list in that order, not only its head (which an order by id could give).
    expect(before[0]).toMatchObject({ id: ada.clientId });
    const counts = before.map((c) => c['live_connections'] as number);
    expect(counts).toEqual([...counts].sort((x, y) => y - x));
    expect(new Set(counts).size, 'counts that differ, for the order to show').toBeGreaterThan(1);

    const r = await svc('clients', 'disconnect', '--client-id', ada.clientId);
    expect(r).toEqual({
      code: 0,
      out:
        `${ada.clientId}: 2 connections ended; every instance refuses their tokens within ` +
        `${serving.server.config.livenessCacheSeconds} s. The application may still ask members to connect it again.`,
      err: '',
    });
    pastTheLivenessBound();
    expect(await call(ada.tokens['access_token']!)).toBe(401);
    expect(await call(grace.tokens['access_token']!)).toBe(401);
    expect(await refresh(ada)).toBe(400);
    expect(await refresh(grace)).toBe(400);
    // The other application is untouched.
    expect(await call(other.tokens['access_token']!)).toBe(200);
    expect(await refresh(other)).toBe(200);
    // Each agency's history says who ended them.
    const endings = await serving.server.services.ctx.db
      .selectFrom('audit_events')
      .select('detail')
      .where('type', '=', 'connection.revoked')
      .execute();
    expect(
      endings
        .filter((e) => JSON.parse(e.detail).reason === 'client_ended_by_operator')
        .map((e) => JSON.parse(e.detail).client_id),
    ).toEqual([ada.clientId, ada.clientId]);
    // No longer among those acting for members; still known, with none, under --all (the pre-registered ones too).
    expect((await listed()).map((c) => c['id'])).not.toContain(ada.clientId);
    expect((await listed()).map((c) => c['id'])).toContain(otherId);
    const all = await listed('--all');
    expect(all).toContainEqual(expect.objectContaining({ id: ada.clientId, live_connections: 0, users: 0 }));
    expect(all).toContainEqual(expect.objectContaining({ kind: 'preregistered', live_connections: 0 }));
    // Again: nothing left to end. An unknown client is refused.
    expect((await svc('clients', 'disconnect', '--client-id', ada.clientId)).out).toMatch(
      /: 0 connections ended/,
    );
    expect(await svc('clients', 'disconnect', '--client-id', 'no-such-client')).toMatchObject({
      code: 2,
      err: expect.stringContaining('no OAuth client no-such-client'),
    });
  });
});
