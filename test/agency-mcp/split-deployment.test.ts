import { createServer } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type Services, startServices } from '../../src/app.js';
import { boundPort, loadConfig } from '../../src/config/config.js';
import { inProcessDashboardApi } from '../../src/dashboard-api/plugin.js';
import { revokeConnection } from '../../src/domain/connections.js';
import { ENGINE, LogCapture, startTestServer, type TestServer } from '../helpers/harness.js';
import { connectClient, MODERN, modernRequest } from '../helpers/mcp.js';
import { dependencyUp } from '../helpers/ops.js';
import { TcpForwarder } from '../helpers/tcp-forwarder.js';
import { AGENCY_SECRET, grant } from './helpers.js';

/**
 * `svc start --only agency-mcp` beside a separate authorization server: the agency MCP server then reaches the
 * token exchange and the dashboard API over HTTP at AUTH_URL, authenticated with the shared client secret.
 */

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });

let auth: TestServer;
let agency: Services;
let agencyUrl: string;

beforeAll(async () => {
  const port = await freePort();
  agencyUrl = `http://127.0.0.1:${port}`;
  auth = await startTestServer({
    env: { AGENCY_MCP_URL: agencyUrl, AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET },
  });
  const database = auth.config.databaseUrl
    ? { DATABASE_URL: auth.config.databaseUrl }
    : { DATA_DIR: auth.config.dataDir };
  const config = loadConfig({
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    API_PORT: '0',
    MCP_PORT: '0',
    AUTH_PORT: '0',
    AGENCY_MCP_PORT: String(port),
    BASE_URL: auth.url.api,
    MCP_URL: auth.url.mcp,
    AUTH_URL: auth.url.auth,
    AGENCY_MCP_URL: agencyUrl,
    AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET,
    ...database,
  });
  agency = await startServices(config, {
    only: ['agency-mcp'],
    clock: auth.clock,
    logger: pino({ level: 'silent' }),
    seedDemoIfEmpty: false,
  });
});
afterAll(async () => {
  await agency?.close();
  await auth?.close();
});

it(`serves tools through the token exchange and the dashboard API over HTTP (${ENGINE})`, async () => {
  expect(inProcessDashboardApi(agency.ctx), 'no auth surface in this process').toBeUndefined();
  const { token } = await grant(auth);
  const client = await connectClient(`${agencyUrl}/mcp`, token, MODERN);
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    expect(tools).toContain('list_clients');
    const result = await client.callTool({ name: 'list_clients', arguments: {} });
    expect(result.isError).toBeFalsy();
    const list = result.structuredContent as { object: string; data: { object: string }[] };
    expect(list.object).toBe('list');
    expect(list.data.length).toBeGreaterThan(0);
    expect(list.data.every((c) => c.object === 'client')).toBe(true);
  } finally {
    await client.close();
  }
});

/** `tools/call list_clients` on the agency MCP server at `mcpUrl` (its `/mcp`). */
const listClients = (mcpUrl: string, token: string) =>
  modernRequest(mcpUrl, 'tools/call', { name: 'list_clients', arguments: {} }, { token });

/** An outage as the agency MCP server answers it: 503, the Retry-After given, a JSON-RPC server error. */
async function expectOutage(res: Response, retryAfter: string): Promise<void> {
  expect(res.status).toBe(503);
  expect(res.headers.get('retry-after')).toBe(retryAfter);
  expect(((await res.json()) as { error: { code: number } }).error.code).toBe(-32000);
}

it('stops serving a connection revoked by the authorization server, within the liveness bound', async () => {
  const g = await grant(auth);
  const call = () => listClients(`${agencyUrl}/mcp`, g.token);
  expect((await call()).status).toBe(200);
  await revokeConnection(auth.services.ctx.db, auth.clock, g.connection.id, 'disconnected');
  auth.clock.advance(auth.config.livenessCacheSeconds * 1000 + 1);
  const refused = await call();
  expect(refused.status).toBe(401);
  expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=');
});

/** `svc start --only agency-mcp` on `beside`'s database, logging at info into a capture. */
async function startSplitAgencyMcp(beside: TestServer, env: Record<string, string>) {
  const logs = new LogCapture();
  const database = beside.config.databaseUrl
    ? { DATABASE_URL: beside.config.databaseUrl }
    : { DATA_DIR: beside.config.dataDir };
  const services = await startServices(
    loadConfig({ NODE_ENV: 'test', HOST: '127.0.0.1', ...env, ...database }),
    {
      only: ['agency-mcp'],
      clock: beside.clock,
      logger: pino({ level: 'info' }, logs.stream),
      seedDemoIfEmpty: false,
    },
  );
  return { services, logs };
}

it('answers 503, and tells the operator, when its client secret is not the authorization server’s', async () => {
  const { services: other, logs } = await startSplitAgencyMcp(auth, {
    AGENCY_MCP_PORT: '0',
    AUTH_URL: auth.url.auth,
    AGENCY_MCP_URL: agencyUrl,
    AGENCY_MCP_CLIENT_SECRET: 'x'.repeat(40),
  });
  try {
    const { token } = await grant(auth);
    const port = boundPort(other.ctx.config, 'agency-mcp');
    const res = await listClients(`http://127.0.0.1:${port}/mcp`, token);
    // Not the caller's fault: 503 with Retry-After and a JSON-RPC error, and a log line naming the setting to fix.
    await expectOutage(res, '30');
    expect(JSON.stringify(logs.lines)).toContain('AGENCY_MCP_CLIENT_SECRET');
  } finally {
    await other.close();
  }
});

it(`a secret rotated without a moment of refusal: the agency MCP server presents its first, the token exchange takes each (${ENGINE})`, async () => {
  const [next, other] = ['n'.repeat(40), 'o'.repeat(40)];
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  // The authorization server mid-rotation: it takes the old secret and the next one.
  const rotating = await startTestServer({
    env: { AGENCY_MCP_URL: url, AGENCY_MCP_CLIENT_SECRET: `${AGENCY_SECRET},${next}` },
  });
  const callWith = async (secrets: string) => {
    const { services } = await startSplitAgencyMcp(rotating, {
      AGENCY_MCP_PORT: String(port),
      AUTH_URL: rotating.url.auth,
      AGENCY_MCP_URL: url,
      AGENCY_MCP_CLIENT_SECRET: secrets,
    });
    try {
      return await listClients(`${url}/mcp`, (await grant(rotating)).token);
    } finally {
      await services.close();
    }
  };
  try {
    // An agency MCP server not yet rolled (the old secret first), and one rolled already (the next one first).
    expect((await callWith(`${AGENCY_SECRET},${next}`)).status).toBe(200);
    expect((await callWith(`${next},${AGENCY_SECRET}`)).status).toBe(200);
    // Only the first is presented: a list whose first the authorization server does not take is refused.
    await expectOutage(await callWith(`${other},${AGENCY_SECRET}`), '30');
  } finally {
    await rotating.close();
  }
});

it(`an authorization server that stops answering is an outage: 503 with Retry-After within AUTH_SERVER_TIMEOUT_MS, logged once (${ENGINE})`, async () => {
  // The auth surface's own URL goes through a forwarder, so the agency MCP process reaches it only through that.
  const authPort = await freePort();
  const forwarder = await TcpForwarder.start({ host: '127.0.0.1', port: authPort });
  const authUrl = `http://127.0.0.1:${forwarder.port}`;
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const server = await startTestServer({
    env: {
      AUTH_PORT: String(authPort),
      AUTH_URL: authUrl,
      AGENCY_MCP_URL: url,
      AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET,
    },
  });
  const { services: split, logs } = await startSplitAgencyMcp(server, {
    AGENCY_MCP_PORT: String(port),
    AUTH_URL: authUrl,
    AGENCY_MCP_URL: url,
    AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET,
    AUTH_SERVER_TIMEOUT_MS: '300',
    METRICS_PORT: '0',
  });
  const ready = async () => {
    const res = await fetch(`${url}/ready`);
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: await res.json() };
  };
  try {
    const { token } = await grant(server);
    expect(await ready()).toMatchObject({
      status: 200,
      body: { status: 'ready', checks: { auth_server: 'up' } },
    });
    forwarder.stall();
    for (let i = 0; i < 2; i++) {
      await expectOutage(await listClients(`${url}/mcp`, token), '5');
    }
    // The metric an operator alerts on says so too (only the log did).
    expect(await dependencyUp(split.metricsUrl!, 'auth_server')).toBe(0);
    // Out of rotation meanwhile: this instance serves no tool call without the authorization server.
    expect(await ready()).toMatchObject({
      status: 503,
      retryAfter: '5',
      body: { status: 'unavailable', checks: { database: 'up', auth_server: 'down' } },
    });
    // Warnings and errors beside the access log's lines (a 503 is logged per request there, at error).
    const lines = logs.lines.filter((l) => (l['level'] as number) >= 40 && l['msg'] !== 'request');
    expect(lines.map((l) => l['msg'])).toEqual(['authorization server (dashboard API) unavailable']);
    forwarder.resume();
    expect(await ready()).toMatchObject({ status: 200, body: { checks: { auth_server: 'up' } } });
    expect((await listClients(`${url}/mcp`, token)).status).toBe(200);
    expect(await dependencyUp(split.metricsUrl!, 'auth_server')).toBe(1);
  } finally {
    forwarder.resume();
    await split.close();
    await server.close();
    await forwarder.close();
  }
});
