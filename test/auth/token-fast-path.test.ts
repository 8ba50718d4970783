import { connect as connectSocket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { Params } from '../../src/web/form.js';
import { DependencyUnavailable } from '../../src/http/dependency-outage.js';
import { accessLine as accessLineOf, sendToBoth, type Side } from '../helpers/fast-path-compare.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';
import { type RawResponse, rawRequest } from '../helpers/raw-http.js';
import { connect } from './oauth-helpers.js';

/**
 * The refresh_token grant answered beside Fastify (src/auth/token-fast-path.ts) must be indistinguishable from the
 * token route: the same status, headers in the same order, body, access log line and metrics, for every answer of
 * the grant; and every request it does not take must reach the route with its body intact. One server with the fast
 * path, one with TOKEN_FAST_PATH=off, the same requests to both.
 */
let fast: TestServer;
let slow: TestServer;

beforeAll(async () => {
  const env = { METRICS_PORT: '0', AGENCY_MCP_URL: 'http://127.0.0.1:4102' };
  [fast, slow] = await Promise.all([
    startTestServer({ env }),
    startTestServer({ env: { ...env, TOKEN_FAST_PATH: 'off' } }),
  ]);
});
afterAll(() => Promise.all([fast?.close(), slow?.close()]));

const server = (side: Side) => (side === 'fast' ? fast : slow);

/** A refresh chain on each side: its client and its current refresh token. */
interface Chain {
  clientId: string;
  refreshToken: string;
}
async function chains(): Promise<Record<Side, Chain>> {
  const one = async (side: Side) => {
    const { clientId, tokens } = await connect(server(side), {
      resource: `${server(side).url.agencyMcp}/mcp`,
    });
    return { clientId, refreshToken: tokens['refresh_token']! };
  };
  return { fast: await one('fast'), slow: await one('slow') };
}

interface Sent {
  form?: Record<Side, [string, string][]>;
  body?: string;
  headers?: [string, string][];
}

function send(side: Side, o: Sent) {
  const body = o.body ?? new URLSearchParams(o.form![side]).toString();
  return rawRequest(`${server(side).url.auth}/oauth/token`, {
    method: 'POST',
    headers: o.headers ?? [['Content-Type', 'application/x-www-form-urlencoded']],
    body,
  });
}

/** The response with what differs by nature between two servers (tokens, ids, request ids, URLs) made equal. */
function comparable(side: Side, r: RawResponse) {
  const requestId = r.header('x-request-id') ?? '';
  const json = r.body ? (JSON.parse(r.body) as Record<string, unknown>) : {};
  for (const key of ['access_token', 'refresh_token']) if (key in json) json[key] = typeof json[key];
  const headers = Object.entries(r.headers)
    .filter(([name]) => name !== 'date')
    .map(([name, values]) => [
      name,
      values.map((v) => v.replaceAll(requestId, 'req_X').replaceAll(server(side).url.auth, 'AUTH')),
    ]);
  const names = (s: string) => s.replace(/(cli|req)_[A-Za-z0-9]+/g, '$1_X');
  return { status: r.status, headers, body: names(JSON.stringify(json)) };
}

const COUNTERS = /^svc_(http_requests|oauth_refresh)_total\{/;
const accessLine = (side: Side, requestId: string) => accessLineOf(server(side), requestId);

const both = (o: Sent) => sendToBoth({ fast, slow }, COUNTERS, (side) => send(side, o));

async function expectSame(o: Sent, status: number) {
  const { a, b, fastCounted, slowCounted } = await both(o);
  expect(a.status).toBe(status);
  expect(comparable('fast', a)).toEqual(comparable('slow', b));
  expect(accessLine('fast', a.header('x-request-id')!)).toEqual(
    accessLine('slow', b.header('x-request-id')!),
  );
  expect(fastCounted).toEqual(slowCounted);
  return { a, b };
}

const refresh = (c: Record<Side, Chain>, extra: [string, string][] = []) => ({
  form: Object.fromEntries(
    (['fast', 'slow'] as const).map((side) => [
      side,
      [
        ['grant_type', 'refresh_token'],
        ['refresh_token', c[side].refreshToken],
        ['client_id', c[side].clientId],
        ...extra,
      ],
    ]),
  ) as Record<Side, [string, string][]>,
});

describe('the refresh_token grant beside Fastify answers exactly what the token route answers', () => {
  it('a rotation, and a retry of the same token within the reuse window', async () => {
    const c = await chains();
    const { a } = await expectSame(refresh(c), 200);
    const successor = (a.json() as Record<string, string>)['refresh_token'];
    const { a: retry } = await expectSame(refresh(c), 200);
    expect((retry.json() as Record<string, string>)['refresh_token']).toBe(successor);
  });

  it('takes the refresh grant over the wire, and hands the rest to the route', async () => {
    // The route reads its parameters with Params.fromBody; the fast path builds them from the body it read itself.
    const routeReads = vi.spyOn(Params, 'fromBody');
    try {
      const c = await chains();
      routeReads.mockClear();
      expect((await send('fast', refresh(c))).status).toBe(200);
      expect(routeReads).not.toHaveBeenCalled();
      expect((await send('slow', refresh(c))).status).toBe(200);
      expect(routeReads).toHaveBeenCalledTimes(1);
      expect((await send('fast', refresh(c, [['client_secret', 'x']]))).status).toBe(401);
      expect(routeReads).toHaveBeenCalledTimes(2);
    } finally {
      routeReads.mockRestore();
    }
  });

  it.each([
    ['a database outage', () => new DependencyUnavailable('database'), 503],
    ['a bug', () => new Error('boom'), 500],
  ] as [string, () => Error, number][])(
    '%s: the same error answer, logged alike',
    async (_name, failure, status) => {
      const c = await chains();
      // The grant's read fails: a statement of its own on PostgreSQL, inside the group commit on SQLite.
      const sqls = (['fast', 'slow'] as const).map((side) => server(side).services.ctx.store.sql);
      const saved = sqls.map((sql) => ({ ...sql }));
      for (const sql of sqls) {
        sql.rows = () => Promise.reject(failure());
        if (sql.engine === 'sqlite') sql.atomically = () => Promise.reject(failure());
      }
      try {
        const { a } = await expectSame(refresh(c), status);
        if (status === 503) expect(a.header('retry-after')).toBe('5');
        const logged = (side: Side, id: string) =>
          server(side).logs.lines.filter((l) => l['request_id'] === id && l['msg'] === 'unhandled error')
            .length;
        expect(logged('fast', a.header('x-request-id')!)).toBe(status === 500 ? 1 : 0);
      } finally {
        sqls.forEach((sql, i) => Object.assign(sql, saved[i]));
      }
    },
  );

  it.each([
    ['an unknown refresh token', (c: Record<Side, Chain>) => refreshWith(c, { refresh_token: 'nope' })],
    ['another client', (c: Record<Side, Chain>) => refreshWith(c, { client_id: 'cli_someoneelse' })],
    ['no refresh_token', (c: Record<Side, Chain>) => refreshWith(c, { refresh_token: '' })],
    ['a repeated client_id', (c: Record<Side, Chain>) => refresh(c, [['client_id', 'x']])],
    ['a wider scope', (c: Record<Side, Chain>) => refresh(c, [['scope', 'agency:mcp:write']])],
    [
      'another resource',
      (c: Record<Side, Chain>) => refresh(c, [['resource', 'https://elsewhere.example/mcp']]),
    ],
  ])('%s', async (_name, request) => {
    const c = await chains();
    const { a } = await expectSame(request(c), 400);
    expect(a.header('access-control-allow-origin')).toBe('*');
  });

  it('reuse of a token older than the immediately previous one ends the connection, answered alike', async () => {
    const c = await chains();
    const original = { fast: { ...c.fast }, slow: { ...c.slow } };
    for (let i = 0; i < 2; i++) {
      for (const side of ['fast', 'slow'] as const) {
        const r = await send(side, refresh(c));
        expect(r.status).toBe(200);
        c[side].refreshToken = (r.json() as Record<string, string>)['refresh_token']!;
      }
    }
    await expectSame(refresh(original), 400);
    // The connection is over: its current token is refused too.
    await expectSame(refresh(c), 400);
  });

  const FORM: [string, string] = ['Content-Type', 'application/x-www-form-urlencoded'];
  it.each([
    ['client credentials in an Authorization header', [FORM, ['Authorization', 'Basic eDp5']], []],
    ['a client_secret', [FORM], [['client_secret', 'x']]],
    ['a repeated grant_type', [FORM], [['grant_type', 'refresh_token']]],
    ['a body over the limit', [FORM], [['padding', 'x'.repeat(20_000)]]],
    [
      'a form type with a charset',
      [['Content-Type', 'application/x-www-form-urlencoded; charset=utf-8']],
      [],
    ],
  ] as [string, [string, string][], [string, string][]][])(
    'left to the route: %s',
    async (_name, headers, extra) => {
      const c = await chains();
      const { a, b } = await both({ ...refresh(c, extra), headers });
      expect(comparable('fast', a)).toEqual(comparable('slow', b));
    },
  );

  it('hands other grants to the route with their body intact', async () => {
    // The fast path reads the body before it knows the grant; the route must still read the same parameters.
    const form: [string, string][] = [
      ['grant_type', 'authorization_code'],
      ['code', 'not-a-code'],
      ['code_verifier', 'a'.repeat(43)],
      ['client_id', 'cli_x'],
    ];
    const { a } = await expectSame({ form: { fast: form, slow: form } }, 400);
    expect(a.json()).toEqual({
      error: 'invalid_grant',
      error_description: 'The authorization code is invalid',
    });
    const unsupported: [string, string][] = [['grant_type', 'password']];
    await expectSame({ form: { fast: unsupported, slow: unsupported } }, 400);
  });
});

function refreshWith(c: Record<Side, Chain>, values: Record<string, string>) {
  const r = refresh(c);
  for (const side of ['fast', 'slow'] as const) {
    r.form[side] = r.form[side].map(([k, v]) => [k, values[k] ?? v]);
  }
  return r;
}

describe('the form fast path reading a body', () => {
  it('survives a client that closes before its body has arrived, and serves the next one', async () => {
    const url = new URL(fast.url.auth);
    await new Promise<void>((resolve, reject) => {
      const socket = connectSocket(Number(url.port), url.hostname, () => {
        socket.write(
          'POST /oauth/token HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n' +
            'Content-Length: 100\r\n\r\ngrant_type=refresh_token',
        );
        setTimeout(() => socket.destroy(), 50);
      });
      socket.on('close', () => resolve());
      socket.on('error', reject);
    });
    const c = await chains();
    expect((await send('fast', refresh(c))).status).toBe(200);
  });
});
