import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import process from 'node:process';
import { z } from 'zod';
import { addressSet, isAddressEntry, withoutPort } from '../base/address-set.js';
import { issueText } from '../base/issue-text.js';

/**
 * Every setting of the service, read from the environment and validated once at start.
 * The README's configuration table is the user-facing copy of this list; keep them in step.
 */

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);
const seconds = z.coerce.number().int().min(0);
const onOff = z.enum(['on', 'off']).transform((v) => v === 'on');
/** A comma-separated list, each entry trimmed. */
const commaList = (value: string) => value.split(',').map((entry) => entry.trim());

/**
 * TRUST_PROXY: the proxies whose `X-Forwarded-For` names the client, as addresses, CIDR blocks or range names; `off`
 * (none) is the empty list. Each proxy appends the address it was reached from to whatever the header already held,
 * and a client writes any entries it likes before them: the client's address is the last entry appended by a proxy of
 * the operator's own, found only by knowing which peers are those proxies. `on`, which trusted the whole header, is
 * refused: with it the rate limits keyed on the first entry, the client's own choice, a fresh one per attempt. A hop
 * count is not offered either (Fastify now trusts no one for it: a direct client could claim the hops).
 */
const trustedProxies = z.string().transform((value, ctx): string[] => {
  if (value === 'off') return [];
  const entries = commaList(value);
  if (value !== 'on' && entries.every(isAddressEntry)) return entries;
  ctx.addIssue({
    code: 'custom',
    message:
      "name the proxies that set X-Forwarded-For: 'off', or a comma-separated list of their addresses or CIDR " +
      "blocks (or loopback, linklocal, uniquelocal); 'on' trusted every entry, a client's own too",
  });
  return z.NEVER;
});

/** A public URL: http(s), no query, no fragment, no trailing slash (issuer and audiences compare byte for byte). */
const publicUrl = z
  .url({ protocol: /^https?$/ })
  .refine((u) => !/[?#]/.test(u), 'must not carry a query or fragment')
  .transform((u) => u.replace(/\/+$/, ''));

export const envSchema = z.object({
  NODE_ENV: z.enum(['production', 'development', 'test']).default('development'),
  HOST: z.string().min(1).default('127.0.0.1'),
  API_PORT: port.default(4000),
  MCP_PORT: port.default(4001),
  AGENCY_MCP_PORT: port.default(4002),
  AUTH_PORT: port.default(4003),
  METRICS_PORT: port.optional(),
  METRICS_HOST: z.string().min(1).optional(),
  BASE_URL: publicUrl.optional(),
  MCP_URL: publicUrl.optional(),
  AGENCY_MCP_URL: publicUrl.optional(),
  // The issuer's pages, their links and redirects (`/sign-in`, `/dashboard`), its `__Host-` cookies (RFC 6265bis
  // §4.1.3.2: `Path=/`) and its metadata (RFC 8414 §3) all live at the root of its host: a path there was accepted,
  // and every one of them then pointed outside it.
  AUTH_URL: publicUrl
    .refine(
      (u) => new URL(u).pathname === '/',
      'must be an origin without a path (https://auth.example.com): the authorization server serves its pages, ' +
        'cookies and metadata from the root of its own host',
    )
    .optional(),
  DATA_DIR: z.string().min(1).default('./.data'),
  DATABASE_URL: z
    .string()
    .regex(/^postgres(ql)?:\/\//, 'must be a postgres:// or postgresql:// URL')
    .optional(),
  DATABASE_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  DATABASE_STATEMENT_TIMEOUT_MS: z.coerce.number().int().min(100).max(600_000).default(10_000),
  DATABASE_POOL_SIZE: positiveInt.max(200).default(10),
  DATABASE_TRANSACTION_POOLER: onOff.default(false),
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  TRUST_PROXY: trustedProxies.default([]),
  SIGNING_ALG: z.enum(['RS256', 'ES256']).default('ES256'),
  SESSION_TTL_SECONDS: positiveInt.default(30 * 24 * 3600),
  TOKEN_CACHE_SIZE: z.coerce.number().int().min(0).default(10_000),
  LIVENESS_CACHE_SECONDS: seconds.max(300).default(5),
  BODY_LIMIT_BYTES: positiveInt.max(10 * 1024 * 1024).default(64 * 1024),
  MAX_HEADER_BYTES: z.coerce
    .number()
    .int()
    .min(1024)
    .max(1024 * 1024)
    .default(16 * 1024),
  ACCESS_LOG: onOff.default(true),
  LOG_BUFFER_BYTES: z.coerce
    .number()
    .int()
    .min(64 * 1024)
    .max(1024 * 1024 * 1024)
    .default(8 * 1024 * 1024),
  REQUEST_TIMEOUT_SECONDS: positiveInt.max(600).default(30),
  KEEP_ALIVE_TIMEOUT_SECONDS: positiveInt.max(3600).default(72),
  MAX_CONNECTIONS_PER_IP: z.coerce.number().int().min(0).max(100_000).default(256),
  SIGNIN_LIMIT_PER_USERNAME: positiveInt.default(10),
  SIGNIN_LIMIT_PER_IP: positiveInt.default(100),
  SIGNIN_LIMIT_WINDOW_SECONDS: positiveInt.default(15 * 60),
  SHUTDOWN_TIMEOUT_SECONDS: positiveInt.max(600).default(10),
  MCP_FAST_PATH: onOff.default(true),
  REST_FAST_PATH: onOff.default(true),
  TOKEN_FAST_PATH: onOff.default(true),
  // Authorization server (docs/contract.md#the-oauth-flow).
  OAUTH_USER_RESOURCES: onOff.default(false),
  REFRESH_REUSE_GRACE_SECONDS: seconds.max(60).default(30),
  PREREGISTERED_CLIENTS_FILE: z.string().min(1).optional(),
  DCR_MAX_CLIENTS: positiveInt.default(10_000),
  DCR_UNUSED_TTL_SECONDS: positiveInt.default(24 * 3600),
  DCR_LIMIT_PER_IP: positiveInt.default(20),
  DCR_LIMIT_WINDOW_SECONDS: positiveInt.default(3600),
  CIMD_FETCH_TIMEOUT_MS: z.coerce.number().int().min(100).max(10_000).default(3000),
  AUTH_SERVER_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5000),
  CIMD_MAX_CLIENTS: positiveInt.default(10_000),
  CIMD_FETCH_LIMIT_PER_IP: positiveInt.default(30),
  CIMD_FETCH_LIMIT_WINDOW_SECONDS: positiveInt.default(3600),
  CIMD_MAX_CONCURRENT_FETCHES: positiveInt.max(1000).default(8),
  CIMD_TEST_CA_FILE: z.string().min(1).optional(),
  CIMD_TEST_ALLOW_LOOPBACK: onOff.default(false),
  CIMD_TEST_DNS_SERVERS: z
    .string()
    .transform(commaList)
    .refine(
      (servers) => servers.every((server) => isIP(withoutPort(server)) !== 0),
      'a comma-separated list of name servers: address or address:port ([address]:port for IPv6)',
    )
    .optional(),
  // Agency MCP server → token exchange (RFC 8693); unset = a random secret per process (docs/contract.md#agency-mcp-server).
  // A comma-separated list while the secret is rotated: the first is presented, each is accepted.
  AGENCY_MCP_CLIENT_SECRET: z
    .string()
    // A split string has at least one entry.
    .transform((value) => commaList(value) as [string, ...string[]])
    .refine(
      (secrets) => secrets.length <= 3 && secrets.every((s) => s.length >= 32 && s.length <= 512),
      'one secret of 32 to 512 characters, or while one is rotated up to three, comma-separated',
    )
    .optional(),
});

/** Settings that weaken a safety rule for tests; a production process refuses to start with them. */
const TEST_ONLY: (keyof Env)[] = ['CIMD_TEST_CA_FILE', 'CIMD_TEST_ALLOW_LOOPBACK', 'CIMD_TEST_DNS_SERVERS'];

export type Env = z.infer<typeof envSchema>;

export type Surface = 'api' | 'mcp' | 'agency-mcp' | 'auth';
export const SURFACES: readonly Surface[] = ['api', 'mcp', 'agency-mcp', 'auth'];

/** The setting of each surface's public URL. */
const URL_SETTINGS: Readonly<Record<Surface, 'BASE_URL' | 'MCP_URL' | 'AGENCY_MCP_URL' | 'AUTH_URL'>> = {
  api: 'BASE_URL',
  mcp: 'MCP_URL',
  'agency-mcp': 'AGENCY_MCP_URL',
  auth: 'AUTH_URL',
};

/** The setting of each surface's port, for messages that tell an operator what to change. */
export const PORT_SETTINGS: Readonly<Record<Surface, keyof Env>> = {
  api: 'API_PORT',
  mcp: 'MCP_PORT',
  'agency-mcp': 'AGENCY_MCP_PORT',
  auth: 'AUTH_PORT',
};

export interface Config {
  env: Env['NODE_ENV'];
  production: boolean;
  host: string;
  ports: Record<Surface, number>;
  /** The Prometheus listener's port (`GET /metrics`); undefined = no metrics (docs/deployment.md#metrics). */
  metricsPort: number | undefined;
  /**
   * The address the Prometheus listener binds: METRICS_HOST, else HOST. Its own setting so that the metrics can stay on
   * an internal address while the surfaces face the network (`HOST=0.0.0.0`).
   */
  metricsHost: string;
  /**
   * Public URLs: as set, or else the listen address's (`http://127.0.0.1:4003`); a surface on port 0 has none here and
   * gets one once the services listen (`publishBindings`).
   */
  urls: Record<Surface, string | undefined>;
  /** The surfaces whose public URL was set (`urls` holds the listen address's for the others). */
  urlsSet: readonly Surface[];
  dataDir: string;
  databaseUrl: string | undefined;
  databasePoolSize: number;
  /** Longest wait for a PostgreSQL connection (new, or free in the pool). */
  databaseConnectTimeoutMs: number;
  /** Longest a PostgreSQL statement may run, lock waits included. */
  databaseStatementTimeoutMs: number;
  /**
   * PostgreSQL is reached through a pooler in transaction mode (PgBouncer's `pool_mode = transaction`): each transaction
   * may run on another server connection, so nothing may rest on a session's state (store/database.ts).
   */
  databaseTransactionPooler: boolean;
  /** A split agency-mcp process's longest wait for the authorization server (token exchange, dashboard API). */
  authServerTimeoutMs: number;
  redisUrl: string | undefined;
  logLevel: Env['LOG_LEVEL'];
  /** Bytes of log lines held while stdout takes none; past them lines are dropped (http/log-output.ts). */
  logBufferBytes: number;
  /** The proxies trusted to say in `X-Forwarded-For` where a request came from (TRUST_PROXY); empty: none. */
  trustedProxies: readonly string[];
  signingAlg: Env['SIGNING_ALG'];
  sessionTtlSeconds: number;
  tokenCacheSize: number;
  livenessCacheSeconds: number;
  bodyLimitBytes: number;
  maxHeaderBytes: number;
  /** One info line per request (the access log); off: successes at debug only. */
  accessLog: boolean;
  /** Time a client has to send a whole request, headers and body (slow-body attacks). */
  requestTimeoutSeconds: number;
  /**
   * How long an idle keep-alive connection is kept. It must outlast the idle timeout of the proxy in front, which
   * otherwise may send a request on a connection the server is closing at that moment: the proxy's 502 or 503.
   */
  keepAliveTimeoutSeconds: number;
  /** Open connections per peer address (an IPv6 peer's /64) per surface; 0 = no cap. Not applied to TRUST_PROXY's. */
  maxConnectionsPerIp: number;
  signinLimit: { perUsername: number; perIp: number; windowSeconds: number };
  shutdownTimeoutSeconds: number;
  /** Both MCP servers answer their hottest canonical calls without the SDK (src/mcp/fast-path.ts); off = all via the SDK. */
  mcpFastPath: boolean;
  /** The REST API answers `GET /me` in its hottest shape beside Fastify (src/api/me-fast-path.ts); off = all via Fastify. */
  restFastPath: boolean;
  /** POST /oauth/token with the refresh_token grant answered beside Fastify (auth/token-fast-path.ts). */
  tokenFastPath: boolean;
  oauth: {
    /** Issue `user:read` tokens for BASE_URL and {MCP_URL}/mcp (docs/contract.md#authentication: not open yet, so off by default). */
    userResources: boolean;
    refreshReuseGraceSeconds: number;
    /** The pre-registered clients data file; undefined = the one shipped in `clients/preregistered.json`. */
    preregisteredClientsFile: string | undefined;
    dcr: { maxClients: number; unusedTtlSeconds: number; perIp: number; windowSeconds: number };
    cimd: {
      fetchTimeoutMs: number;
      maxClients: number;
      fetchesPerIp: number;
      fetchWindowSeconds: number;
      maxConcurrentFetches: number;
      testCaFile: string | undefined;
      testAllowLoopback: boolean;
      /** Name servers for the metadata documents' hosts in place of the system's (`host:port`). */
      testDnsServers: readonly string[] | undefined;
    };
  };
  agencyMcp: {
    /**
     * The internal client's secrets at the token exchange, as AGENCY_MCP_CLIENT_SECRET lists them: the agency MCP server
     * presents the first, the token exchange accepts each, so that a rotation needs no moment when the processes
     * disagree (docs/deployment.md#rotating-the-agency-mcp-client-secret). When the setting is unset, one random secret
     * per process: enough when `agency-mcp` and `auth` share a process.
     */
    clientSecrets: readonly [presented: string, ...alsoAccepted: string[]];
  };
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Parses the environment; throws a ConfigError whose message is one line naming the variable and what is allowed. */
export function loadConfig(source: NodeJS.ProcessEnv = process.env): Config {
  const known = Object.fromEntries(
    Object.keys(envSchema.shape).map((k) => [k, source[k] === '' ? undefined : source[k]]),
  );
  const parsed = envSchema.safeParse(known);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const variable = String(issue.path[0] ?? 'environment');
    throw new ConfigError(`Invalid ${shown(variable, source[variable])}: ${describe(issue)}`);
  }
  const e = parsed.data;
  if (e.NODE_ENV === 'production') {
    for (const variable of TEST_ONLY) {
      if (e[variable] !== undefined && e[variable] !== false) {
        throw new ConfigError(
          `Invalid ${shown(variable, source[variable])}: a test-only setting, refused when NODE_ENV=production`,
        );
      }
    }
    for (const variable of PUBLIC_URLS) {
      const url = e[variable];
      if (url !== undefined && new URL(url).protocol !== 'https:' && !onLoopback(url)) {
        throw new ConfigError(
          `Invalid ${shown(variable, source[variable])}: must be https when NODE_ENV=production (TLS may end at ` +
            'your proxy; the URL is the one clients use), unless its host is this machine',
        );
      }
    }
  }
  return deepFreeze(fromEnv(e));
}

/**
 * The public URLs. In production each is https (OAuth 2.1 §1.5: TLS for every endpoint; RFC 8414 §2: an https issuer),
 * or on this machine: over plain http the bearer tokens, the codes and the browser session would cross the network in
 * the clear, and the cookies would lose `__Host-` and `Secure`. It was accepted, and a missed `s` went unnoticed.
 */
const PUBLIC_URLS = Object.values(URL_SETTINGS);

const LOOPBACK = addressSet(['loopback']);

/** Whether a URL's host is this machine: `localhost`, 127.0.0.0/8 or `::1`. */
function onLoopback(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  return host === 'localhost' || (isIP(host) !== 0 && LOOPBACK.has(host));
}

/**
 * For `svc start` (other commands need no URL), beside the https rule of `loadConfig`: in production every public URL
 * is set, whichever surfaces this process serves. They are the token issuer and the audiences every surface checks,
 * and the addresses the documents advertise. Unset, each defaulted to its listen address (`http://127.0.0.1:4003` as
 * the issuer), which no client elsewhere can use, and the MCP hosts, which accept only their public host in
 * production, refused every request from outside.
 */
export function requirePublicUrls(config: Config): void {
  if (!config.production) return;
  const unset = SURFACES.filter((surface) => !config.urlsSet.includes(surface)).map((s) => URL_SETTINGS[s]);
  if (unset.length === 0) return;
  throw new ConfigError(
    `${unset.join(', ')} must be set when NODE_ENV=production: the public URLs clients use (the token issuer and ` +
      'audiences), which would otherwise be the listen addresses',
  );
}

/** Loaded once, read everywhere: nothing may change the configuration after it is validated. */
function deepFreeze<T>(value: T): T {
  if (value === null || typeof value !== 'object' || ArrayBuffer.isView(value) || Object.isFrozen(value))
    return value;
  for (const inner of Object.values(value)) deepFreeze(inner);
  return Object.freeze(value);
}

/**
 * Settings whose value can carry a secret (a URL's password, the client secret). The error that refuses one goes to
 * stderr, and from there to whatever collects the logs: it names the variable and never shows the secret (OWASP ASVS
 * 7.1.1), where it quoted the whole value (`Invalid DATABASE_URL="postgress://svc:<password>@db/svc"`).
 */
const SECRET_BEARING = new Set(['DATABASE_URL', 'REDIS_URL', 'AGENCY_MCP_CLIENT_SECRET']);

/** `VARIABLE="value"` for an error, with a URL's password as `***`, or a secret's length only. */
function shown(variable: string, value: string | undefined): string {
  if (!SECRET_BEARING.has(variable) || value === undefined) return `${variable}=${JSON.stringify(value)}`;
  // Only a URL whose authority was read as one: a password is then its userinfo's, masked. Anything else
  // (`svc:pw@db:port/svc` is a URL of scheme `svc:` whose path holds the password) is not shown.
  const url = variable.endsWith('_URL') && URL.canParse(value) ? new URL(value) : undefined;
  if (url?.host) {
    if (url.password) url.password = '***';
    return `${variable}=${JSON.stringify(url.href)}`;
  }
  return `${variable} (${value.length} characters, not shown: it can hold a secret)`;
}

function describe(issue: z.core.$ZodIssue): string {
  if (issue.code === 'invalid_value') return `allowed values are ${issue.values.map(String).join(', ')}`;
  return issueText(issue.message);
}

function fromEnv(e: Env): Config {
  const ports: Record<Surface, number> = {
    api: e.API_PORT,
    mcp: e.MCP_PORT,
    'agency-mcp': e.AGENCY_MCP_PORT,
    auth: e.AUTH_PORT,
  };
  const loopbackUrl = (p: number) => (p === 0 ? undefined : `http://${urlHost(e.HOST)}:${p}`);
  return {
    env: e.NODE_ENV,
    production: e.NODE_ENV === 'production',
    host: e.HOST,
    ports,
    metricsPort: e.METRICS_PORT,
    metricsHost: e.METRICS_HOST ?? e.HOST,
    urls: {
      api: e.BASE_URL ?? loopbackUrl(ports.api),
      mcp: e.MCP_URL ?? loopbackUrl(ports.mcp),
      'agency-mcp': e.AGENCY_MCP_URL ?? loopbackUrl(ports['agency-mcp']),
      auth: e.AUTH_URL ?? loopbackUrl(ports.auth),
    },
    urlsSet: SURFACES.filter((surface) => e[URL_SETTINGS[surface]] !== undefined),
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databasePoolSize: e.DATABASE_POOL_SIZE,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databaseStatementTimeoutMs: e.DATABASE_STATEMENT_TIMEOUT_MS,
    databaseTransactionPooler: e.DATABASE_TRANSACTION_POOLER,
    authServerTimeoutMs: e.AUTH_SERVER_TIMEOUT_MS,
    redisUrl: e.REDIS_URL,
    logLevel: e.LOG_LEVEL,
    logBufferBytes: e.LOG_BUFFER_BYTES,
    trustedProxies: e.TRUST_PROXY,
    signingAlg: e.SIGNING_ALG,
    sessionTtlSeconds: e.SESSION_TTL_SECONDS,
    tokenCacheSize: e.TOKEN_CACHE_SIZE,
    livenessCacheSeconds: e.LIVENESS_CACHE_SECONDS,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    maxHeaderBytes: e.MAX_HEADER_BYTES,
    accessLog: e.ACCESS_LOG,
    requestTimeoutSeconds: e.REQUEST_TIMEOUT_SECONDS,
    keepAliveTimeoutSeconds: e.KEEP_ALIVE_TIMEOUT_SECONDS,
    maxConnectionsPerIp: e.MAX_CONNECTIONS_PER_IP,
    signinLimit: {
      perUsername: e.SIGNIN_LIMIT_PER_USERNAME,
      perIp: e.SIGNIN_LIMIT_PER_IP,
      windowSeconds: e.SIGNIN_LIMIT_WINDOW_SECONDS,
    },
    shutdownTimeoutSeconds: e.SHUTDOWN_TIMEOUT_SECONDS,
    mcpFastPath: e.MCP_FAST_PATH,
    restFastPath: e.REST_FAST_PATH,
    tokenFastPath: e.TOKEN_FAST_PATH,
    oauth: {
      userResources: e.OAUTH_USER_RESOURCES,
      refreshReuseGraceSeconds: e.REFRESH_REUSE_GRACE_SECONDS,
      preregisteredClientsFile: e.PREREGISTERED_CLIENTS_FILE,
      dcr: {
        maxClients: e.DCR_MAX_CLIENTS,
        unusedTtlSeconds: e.DCR_UNUSED_TTL_SECONDS,
        perIp: e.DCR_LIMIT_PER_IP,
        windowSeconds: e.DCR_LIMIT_WINDOW_SECONDS,
      },
      cimd: {
        fetchTimeoutMs: e.CIMD_FETCH_TIMEOUT_MS,
        maxClients: e.CIMD_MAX_CLIENTS,
        fetchesPerIp: e.CIMD_FETCH_LIMIT_PER_IP,
        fetchWindowSeconds: e.CIMD_FETCH_LIMIT_WINDOW_SECONDS,
        maxConcurrentFetches: e.CIMD_MAX_CONCURRENT_FETCHES,
        testCaFile: e.CIMD_TEST_CA_FILE,
        testAllowLoopback: e.CIMD_TEST_ALLOW_LOOPBACK,
        testDnsServers: e.CIMD_TEST_DNS_SERVERS,
      },
    },
    agencyMcp: {
      clientSecrets: e.AGENCY_MCP_CLIENT_SECRET ?? [randomBytes(32).toString('base64url')],
    },
  };
}

/** A listen host as it appears in a URL: the wildcard binds become loopback, IPv6 gets brackets. */
export function urlHost(host: string): string {
  if (host === '0.0.0.0' || host === '::') return '127.0.0.1';
  return host.includes(':') ? `[${host}]` : host;
}

interface Binding {
  ports: Readonly<Partial<Record<Surface, number>>>;
  urls: Readonly<Partial<Record<Surface, string>>>;
}

/**
 * Where the surfaces actually listen, published beside the frozen configuration (port 0 means "any port", known
 * only after `listen()`): once per loaded configuration, after every surface of the process has bound its port.
 */
const bindings = new WeakMap<Config, Binding>();

/**
 * Publishes the bound ports of the surfaces this process serves, and the loopback URL of each that has no configured
 * public URL; returns the public URL of each. Once per configuration: the URLs never change afterwards.
 */
export function publishBindings(
  config: Config,
  ports: Partial<Record<Surface, number>>,
): Readonly<Partial<Record<Surface, string>>> {
  if (bindings.has(config)) throw new Error('The bindings of this configuration are already published');
  const urls = Object.fromEntries(
    Object.entries(ports).map(([surface, port]) => [
      surface,
      config.urls[surface as Surface] ?? `http://${urlHost(config.host)}:${port}`,
    ]),
  );
  const binding = { ports: Object.freeze({ ...ports }), urls: Object.freeze(urls) };
  bindings.set(config, binding);
  return binding.urls;
}

/** The public URL of a surface if it is configured or already listening, else undefined. */
export function knownUrl(config: Config, surface: Surface): string | undefined {
  return config.urls[surface] ?? bindings.get(config)?.urls[surface];
}

/** The port a surface listens on: the bound one once it listens, else the configured one. */
export function boundPort(config: Config, surface: Surface): number {
  return bindings.get(config)?.ports[surface] ?? config.ports[surface];
}

/** The URL of a surface; only valid once the services are listening. */
export function urlOf(config: Config, surface: Surface): string {
  const url = knownUrl(config, surface);
  if (!url) throw new Error(`URL of surface ${surface} is not known before it listens`);
  return url;
}
