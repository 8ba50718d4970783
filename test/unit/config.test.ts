import { describe, expect, it } from 'vitest';
import {
  boundPort,
  ConfigError,
  knownUrl,
  loadConfig,
  publishBindings,
  urlOf,
} from '../../src/config/config.js';
import { urls } from '../../src/config/urls.js';

const load = (env: Record<string, string>) => loadConfig(env);
const failure = (env: Record<string, string>) => {
  try {
    load(env);
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('expected a ConfigError');
};

describe('configuration from the environment', () => {
  it('has working defaults: four loopback URLs on ports 4000-4003, embedded database', () => {
    const c = load({});
    expect(c.urls).toEqual({
      api: 'http://127.0.0.1:4000',
      mcp: 'http://127.0.0.1:4001',
      'agency-mcp': 'http://127.0.0.1:4002',
      auth: 'http://127.0.0.1:4003',
    });
    expect(c.databaseUrl).toBeUndefined();
    expect(c.dataDir).toBe('./.data');
    expect(c.production).toBe(false);
  });

  it('keeps public URLs apart from listen ports, and strips a trailing slash', () => {
    const c = load({ API_PORT: '8080', BASE_URL: 'https://api.example.com/' });
    expect(c.ports.api).toBe(8080);
    expect(c.urls.api).toBe('https://api.example.com');
  });

  it('is frozen once loaded, nested values included', () => {
    const c = load({});
    expect(() => Object.assign(c, { host: '0.0.0.0' })).toThrow(TypeError);
    expect(() => Object.assign(c.ports, { api: 1 })).toThrow(TypeError);
    expect(() => Object.assign(c.urls, { api: 'https://elsewhere.example' })).toThrow(TypeError);
    expect(c.ports.api).toBe(4000);
  });

  it('publishes bound ports and URLs beside the configuration: a configured URL wins, port 0 gets loopback', () => {
    const c = load({ API_PORT: '0', MCP_PORT: '0', MCP_URL: 'https://mcp.example.com' });
    expect(knownUrl(c, 'api')).toBeUndefined();
    expect(() => urlOf(c, 'api')).toThrow(/not known before it listens/);
    const published = publishBindings(c, { api: 41234, mcp: 41235 });
    expect(published.api).toBe('http://127.0.0.1:41234');
    expect(published.mcp).toBe('https://mcp.example.com');
    expect(Object.isFrozen(published)).toBe(true);
    expect(() => publishBindings(c, { api: 1 })).toThrow(/already published/);
    expect(urlOf(c, 'api')).toBe('http://127.0.0.1:41234');
    expect(boundPort(c, 'api')).toBe(41234);
    expect(boundPort(c, 'auth')).toBe(4003);
    expect(c.ports.api).toBe(0);
  });

  it("keeps each URL once known, per configuration: not before it is known, never another configuration's", () => {
    const first = load({ API_PORT: '0', MCP_PORT: '0' });
    const second = load({ API_PORT: '0', MCP_URL: 'https://mcp.example.com' });
    expect(() => urls.api(first)).toThrow(/not known before it listens/);
    expect(() => urls.mcpResource(first)).toThrow(/not known before it listens/);
    publishBindings(first, { api: 41236, mcp: 41237 });
    expect(urls.api(first)).toBe('http://127.0.0.1:41236');
    expect(urls.mcpResource(first)).toBe('http://127.0.0.1:41237/mcp');
    expect(urls.mcpResource(second)).toBe('https://mcp.example.com/mcp');
    expect(() => urls.api(second)).toThrow(/not known before it listens/);
    publishBindings(second, { api: 41238 });
    expect(urls.api(second)).toBe('http://127.0.0.1:41238');
    expect(urls.api(first)).toBe('http://127.0.0.1:41236');
    expect(urls.mcpResource(first)).toBe('http://127.0.0.1:41237/mcp');
    expect(urls.issuer(first)).toBe('http://127.0.0.1:4003');
    expect(urls.dashboardApi(first)).toBe('http://127.0.0.1:4003/api');
    expect(urls.sessionApi(first)).toBe('http://127.0.0.1:4003/api/sessions');
  });

  it("keeps idle connections 72 s by default, past the usual proxies' 60 s idle timeout", () => {
    expect(load({}).keepAliveTimeoutSeconds).toBe(72);
    expect(load({ KEEP_ALIVE_TIMEOUT_SECONDS: '620' }).keepAliveTimeoutSeconds).toBe(620);
    expect(
      failure({ KEEP_ALIVE_TIMEOUT_SECONDS: '0' }).startsWith('Invalid KEEP_ALIVE_TIMEOUT_SECONDS='),
    ).toBe(true);
  });

  it('takes the test-only name servers as addresses with or without a port, nothing else', () => {
    expect(
      load({ CIMD_TEST_DNS_SERVERS: '127.0.0.1:5353, [::1]:53,192.0.2.53' }).oauth.cimd.testDnsServers,
    ).toEqual(['127.0.0.1:5353', '[::1]:53', '192.0.2.53']);
    for (const value of ['ns.example', '127.0.0.1:', '[::1]x', '300.0.0.1'])
      expect(failure({ CIMD_TEST_DNS_SERVERS: value }).startsWith('Invalid CIMD_TEST_DNS_SERVERS=')).toBe(
        true,
      );
  });

  it('takes a list of agency MCP client secrets while one is rotated: the first presented, each accepted', () => {
    const [a, b] = ['a'.repeat(32), 'b'.repeat(40)];
    // The first is the one presented (the gateway's), each one accepted (the token exchange's).
    expect(load({ AGENCY_MCP_CLIENT_SECRET: a }).agencyMcp).toEqual({ clientSecrets: [a] });
    expect(load({ AGENCY_MCP_CLIENT_SECRET: `${b}, ${a}` }).agencyMcp).toEqual({ clientSecrets: [b, a] });
    // Each one is a secret of its own: a short one in the list is refused like a short one alone.
    expect(failure({ AGENCY_MCP_CLIENT_SECRET: `${a},short` })).toMatch(
      /^Invalid AGENCY_MCP_CLIENT_SECRET \(/,
    );
  });

  it('takes https public URLs in production, and http ones on this machine', () => {
    const https = { BASE_URL: 'https://api.example.com', AUTH_URL: 'https://auth.example.com' };
    expect(load({ NODE_ENV: 'production', ...https }).urls.auth).toBe('https://auth.example.com');
    for (const local of ['http://localhost:4003', 'http://127.0.0.1:4003', 'http://[::1]:4003'])
      expect(load({ NODE_ENV: 'production', AUTH_URL: local }).urls.auth).toBe(local);
    // Outside production, plain http stays (a developer's machine, a test network).
    expect(load({ AUTH_URL: 'http://auth.example.com' }).urls.auth).toBe('http://auth.example.com');
  });

  it('treats an empty variable as unset', () => {
    expect(load({ API_PORT: '' }).ports.api).toBe(4000);
  });

  it.each([
    [{ API_PORT: '70000' }, 'API_PORT'],
    [{ API_PORT: 'eighty' }, 'API_PORT'],
    [{ BASE_URL: 'ftp://x.example' }, 'BASE_URL'],
    [{ AUTH_URL: 'https://auth.example/?x=1' }, 'AUTH_URL'],
    // The issuer's pages, cookies and metadata are served from the root of its host.
    [{ AUTH_URL: 'https://example.com/auth' }, 'AUTH_URL'],
    // In production a public URL is https, or on this machine.
    [{ NODE_ENV: 'production', AUTH_URL: 'http://auth.example.com' }, 'AUTH_URL'],
    [{ NODE_ENV: 'production', AGENCY_MCP_URL: 'http://10.0.0.5:4002' }, 'AGENCY_MCP_URL'],
    [{ DATABASE_URL: 'mysql://localhost/db' }, 'DATABASE_URL'],
    [{ LIVENESS_CACHE_SECONDS: '-1' }, 'LIVENESS_CACHE_SECONDS'],
    [{ TRUST_PROXY: 'yes' }, 'TRUST_PROXY'],
  ])('refuses %j with one line naming the variable', (env, variable) => {
    const message = failure(env);
    // `VARIABLE="value"`, or for a setting that can hold a secret `VARIABLE (N characters, not shown…)`.
    expect(message).toMatch(new RegExp(`^Invalid ${variable}(=| \\()`));
    expect(message).not.toContain('\n');
  });

  it('takes TRUST_PROXY as the proxies themselves: off, or their addresses, CIDR blocks and range names', () => {
    expect(load({}).trustedProxies).toEqual([]);
    expect(load({ TRUST_PROXY: 'off' }).trustedProxies).toEqual([]);
    expect(load({ TRUST_PROXY: '10.0.0.0/8, 2001:db8::1,loopback' }).trustedProxies).toEqual([
      '10.0.0.0/8',
      '2001:db8::1',
      'loopback',
    ]);
  });

  it.each(['on', '1', '10.0.0.0/33', '10.0.0.0/8,', 'proxy.internal', 'fe80::1%eth0', '10.0.0.0/+8'])(
    'refuses TRUST_PROXY=%j, saying what to write instead',
    (value) => {
      expect(failure({ TRUST_PROXY: value })).toBe(
        `Invalid TRUST_PROXY=${JSON.stringify(value)}: name the proxies that set X-Forwarded-For: 'off', or a ` +
          'comma-separated list of their addresses or CIDR blocks (or loopback, linklocal, uniquelocal); ' +
          "'on' trusted every entry, a client's own too",
      );
    },
  );

  it('never shows a secret a refused setting carries: a URL with its password as ***, a secret by its length only', () => {
    // Each was quoted whole, to stderr and on to whatever collects the logs.
    expect(failure({ DATABASE_URL: 'postgress://svc:s3cret-pw@db.internal/svc' })).toBe(
      'Invalid DATABASE_URL="postgress://svc:***@db.internal/svc": must be a postgres:// or postgresql:// URL',
    );
    expect(failure({ REDIS_URL: 'redis-tls://:s3cret-pw@cache.internal:6379' })).toBe(
      'Invalid REDIS_URL="redis-tls://:***@cache.internal:6379": must be a redis:// or rediss:// URL',
    );
    // Not a URL with an authority (this one parses as the scheme `svc:` with the password in its path): not shown.
    const unparsed = failure({ DATABASE_URL: 'svc:s3cret-pw@db.internal:port/svc' });
    expect(unparsed).toBe(
      'Invalid DATABASE_URL (34 characters, not shown: it can hold a secret): must be a postgres:// or postgresql:// URL',
    );
    expect(failure({ DATABASE_URL: 'postgres:/svc:s3cret-pw@db.internal/svc' })).not.toContain('s3cret');
    expect(failure({ AGENCY_MCP_CLIENT_SECRET: 's3cret-pw-too-short' })).toBe(
      'Invalid AGENCY_MCP_CLIENT_SECRET (19 characters, not shown: it can hold a secret): one secret of 32 to 512 ' +
        'characters, or while one is rotated up to three, comma-separated',
    );
    // A setting that holds no secret is still quoted, so the operator sees what was read.
    expect(failure({ API_PORT: 'eighty' })).toMatch(/^Invalid API_PORT="eighty": /);
  });

  it('lists the allowed values of an enumerated setting', () => {
    expect(failure({ NODE_ENV: 'staging' })).toBe(
      'Invalid NODE_ENV="staging": allowed values are production, development, test',
    );
    expect(failure({ SIGNING_ALG: 'HS256' })).toBe(
      'Invalid SIGNING_ALG="HS256": allowed values are RS256, ES256',
    );
  });
});
