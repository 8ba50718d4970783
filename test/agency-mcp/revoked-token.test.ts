import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Services, startServices } from '../../src/app.js';
import { boundPort, loadConfig } from '../../src/config/config.js';
import { endConnection } from '../../src/domain/connections.js';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';
import { jsonRpcOf, modernRequest, post } from '../helpers/mcp.js';
import { AGENCY_SECRET, grant } from './helpers.js';

/**
 * A connection revoked on one instance: another instance still trusts its cached liveness and token exchange for up
 * to LIVENESS_CACHE_SECONDS, but the dashboard API re-reads the connection on every call and refuses. The agency MCP
 * server must then answer what the revoking instance answers — HTTP 401 with the challenge, never a 200 carrying a
 * tool error — and forget what it cached for the token, so the next request is refused before any work.
 */

let a: TestServer;
let b: TestServer;
let endpointB: string;
/** An agency MCP server alone in its process: it reaches the exchange and the dashboard API of `a` over HTTP. */
let split: Services;
let endpointSplit: string;

beforeAll(async () => {
  a = await startTestServer({ env: { AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET } });
  // Behind a load balancer both instances publish the same URLs: one issuer, one resource.
  b = await startTestServer({
    sharing: a,
    env: { AUTH_URL: a.url.auth, AGENCY_MCP_URL: a.url.agencyMcp },
  });
  endpointB = `http://127.0.0.1:${boundPort(b.config, 'agency-mcp')}/mcp`;
  const config = loadConfig({
    NODE_ENV: 'test',
    HOST: '127.0.0.1',
    AGENCY_MCP_PORT: '0',
    AUTH_URL: a.url.auth,
    AGENCY_MCP_URL: a.url.agencyMcp,
    AGENCY_MCP_CLIENT_SECRET: AGENCY_SECRET,
    ...a.database,
  });
  split = await startServices(config, {
    only: ['agency-mcp'],
    clock: a.clock,
    logger: pino({ level: 'silent' }),
    seedDemoIfEmpty: false,
  });
  endpointSplit = `http://127.0.0.1:${boundPort(config, 'agency-mcp')}/mcp`;
});
afterAll(async () => {
  await split?.close();
  await b?.close();
  await a?.close();
});

type Call = (token: string) => Promise<Response>;

const modernCall =
  (name: string, args: Record<string, unknown>): Call =>
  (token) =>
    modernRequest(endpointB, 'tools/call', { name, arguments: args }, { token });
/** The 2025 wire: the SDK answers it as a stream (SSE), whose status must still become the 401. */
const legacyCall =
  (name: string, args: Record<string, unknown>): Call =>
  (token) =>
    post(
      endpointB,
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args } },
      { token, headers: { 'mcp-protocol-version': '2025-11-25' } },
    );

const CASES: [string, Call][] = [
  ['tools/call on the fast path (2026-07-28, no arguments)', modernCall('list_clients', {})],
  ['tools/call through the SDK (2026-07-28, with arguments)', modernCall('list_clients', { limit: 5 })],
  ['a write tool through the SDK', modernCall('create_client', { name: 'Late Ltd' })],
  ['tools/call on the 2025-11-25 wire', legacyCall('list_clients', { limit: 5 })],
  ['tools/list', (token) => modernRequest(endpointB, 'tools/list', {}, { token })],
];

describe(`a connection revoked on another instance (${ENGINE})`, () => {
  it.each(CASES)(
    '%s: 401 with the challenge inside the liveness window, then refused at once',
    async (_name, call) => {
      const g = await grant(a);
      // Instance B has verified the token, found the connection live and exchanged the token: all cached.
      const warm = await call(g.token);
      expect(warm.status).toBe(200);
      expect((await jsonRpcOf(warm))['error']).toBeUndefined();
      // Revoked on A; B's clock has not moved, so its liveness cache still says "live".
      expect(await endConnection(a.services.ctx, g.connection.id, 'disconnected')).toBe(true);
      const refused = await call(g.token);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toBe(
        `Bearer resource_metadata="${a.url.agencyMcp}/.well-known/oauth-protected-resource/mcp", scope="agency:mcp:read"`,
      );
      expect(refused.headers.get('cache-control')).toBe('no-store');
      expect(await refused.json()).toMatchObject({ error: 'invalid_token' });
      // What B cached for the token is gone: the next request is refused at authentication.
      expect(b.services.ctx.connectionLiveness.isKnownLive(g.connection.id)).toBe(false);
      const again = await call(g.token);
      expect(again.status).toBe(401);
      expect(await again.json()).toMatchObject({ error: 'invalid_token' });
    },
  );

  it('the revoking instance answers the same', async () => {
    const g = await grant(a);
    const endpointA = `${a.url.agencyMcp}/mcp`;
    const call = () =>
      modernRequest(endpointA, 'tools/call', { name: 'list_clients', arguments: {} }, { token: g.token });
    expect((await call()).status).toBe(200);
    await endConnection(a.services.ctx, g.connection.id, 'disconnected');
    const refused = await call();
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('resource_metadata=');
  });
});

describe(`a connection revoked while the dashboard API is reached over HTTP (${ENGINE})`, () => {
  it.each([
    ['the fast path', {}],
    ['the SDK', { limit: 5 }],
  ])('through %s: 401 with the challenge', async (_name, args) => {
    const g = await grant(a);
    const call = () =>
      modernRequest(
        endpointSplit,
        'tools/call',
        { name: 'list_clients', arguments: args },
        { token: g.token },
      );
    expect((await call()).status).toBe(200);
    await endConnection(a.services.ctx, g.connection.id, 'disconnected');
    const refused = await call();
    expect(refused.status).toBe(401);
    expect(refused.headers.get('www-authenticate')).toContain('scope="agency:mcp:read"');
  });
});
