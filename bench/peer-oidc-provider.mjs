// The peer: panva's oidc-provider configured like this service's profile for the refresh grant — one public client
// (token_endpoint_auth_method none, PKCE S256 required), the agency MCP resource by resource indicator (RFC 8707),
// JWT access tokens (RFC 9068) signed with the service's algorithm (PEER_ALG), refresh tokens rotated on every
// use. PEER_STORE picks its storage: memory (its development store), sqlite or postgres (bench/oidc-sql-adapter.mjs).
// It prints its URL and PEER_CHAINS refresh tokens, each of its own grant, made through the provider's models
// (the interactive sign-in and consent are not what is measured).
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Provider from 'oidc-provider';
import { sqlAdapter } from './oidc-sql-adapter.mjs';

const port = Number(process.env.PEER_PORT);
const issuer = `http://127.0.0.1:${port}`;
const resource = process.env.PEER_RESOURCE ?? 'http://127.0.0.1:4102/mcp';
const alg = process.env.PEER_ALG ?? 'RS256';
const clientId = 'bench-client';
const DAY = 24 * 3600;

const keyPair =
  alg === 'ES256'
    ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
    : generateKeyPairSync('rsa', { modulusLength: 2048 });
const jwk = { ...keyPair.privateKey.export({ format: 'jwk' }), alg, use: 'sig', kid: 'bench' };

const store = process.env.PEER_STORE ?? 'memory';
const adapter =
  store === 'memory'
    ? undefined
    : await sqlAdapter(
        store === 'postgres'
          ? { kind: 'postgres', url: process.env.PEER_DATABASE_URL }
          : { kind: 'sqlite', dir: mkdtempSync(join(tmpdir(), 'peer-oidc-')) },
      );

const provider = new Provider(issuer, {
  ...(adapter ? { adapter } : {}),
  clients: [
    {
      client_id: clientId,
      token_endpoint_auth_method: 'none',
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      redirect_uris: ['https://client.example/callback'],
      id_token_signed_response_alg: alg,
    },
  ],
  jwks: { keys: [jwk] },
  cookies: { keys: ['bench-cookie-key-not-a-secret'] },
  findAccount: async (_ctx, id) => ({ accountId: id, claims: async () => ({ sub: id }) }),
  scopes: ['openid', 'offline_access'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: () => resource,
      useGrantedResource: () => true,
      getResourceServerInfo: () => ({
        scope: 'agency:mcp:read agency:mcp:write',
        audience: resource,
        accessTokenTTL: 3600,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg } },
      }),
    },
  },
  // The same claims beside the standard ones as the service's access tokens carry.
  extraTokenClaims: () => ({ agency_id: 'agy_bench', member_id: 'mem_bench', cid: 'con_bench' }),
  rotateRefreshToken: true,
  ttl: { AccessToken: 3600, RefreshToken: 30 * DAY, Grant: 30 * DAY },
});

/** One grant and its first refresh token, as the code exchange would have made them. */
async function chain(client) {
  const grant = new provider.Grant({ accountId: 'grace', clientId });
  grant.addOIDCScope('offline_access');
  grant.addResourceScope(resource, 'agency:mcp:read');
  const grantId = await grant.save();
  const token = new provider.RefreshToken({
    accountId: 'grace',
    client,
    grantId,
    gty: 'authorization_code',
    scope: 'offline_access agency:mcp:read',
    resource,
    expiresWithSession: false,
    iiat: Math.floor(Date.now() / 1000),
    authTime: Math.floor(Date.now() / 1000),
  });
  return token.save();
}

const client = await provider.Client.find(clientId);
const tokens = [];
for (let i = 0; i < Number(process.env.PEER_CHAINS ?? 1); i++) tokens.push(await chain(client));
const callback = provider.callback();
const server = createServer((req, res) => {
  // The bench's own route, beside the provider's: a fresh chain (a new grant and its first refresh token), so that the
  // rotation loops can keep every chain short (PEER_CHAIN_LENGTH in bench/refresh.mjs says why).
  if (req.method === 'POST' && req.url === '/bench/chain') {
    chain(client).then(
      (token) => res.writeHead(200, { 'content-type': 'text/plain' }).end(token),
      (error) => res.writeHead(500).end(String(error)),
    );
    return;
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`peer ${issuer} client ${clientId} chains ${JSON.stringify(tokens)}`);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
