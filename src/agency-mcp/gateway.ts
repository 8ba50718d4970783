import { Buffer } from 'node:buffer';
import { get as httpGet } from 'node:http';
import { get as httpsGet } from 'node:https';
import { DependencyUnavailable, DependencyWatch } from '../http/dependency-outage.js';
import { ApiError, type ErrorBody, UNAVAILABLE_MESSAGE } from '../http/errors.js';
import type { AgencyCall } from './auth.js';
import { OAuthError } from '../http/oauth-errors.js';
import {
  ACCESS_TOKEN_TYPE,
  AGENCY_MCP_CLIENT_ID,
  exchangeToken,
  TOKEN_EXCHANGE_GRANT,
  type TokenExchangeResponse,
} from '../auth/token-exchange.js';
import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { OPERATIONS, type Operation, type OperationId } from '../dashboard-api/operations.js';
import { type DashboardApiResponse, inProcessDashboardApi } from '../dashboard-api/plugin.js';
import { Lru } from '../base/lru.js';

/** The exchange was refused: the inbound token no longer stands for a live grant (answered 401 by the server). */
export class ExchangeRefused extends Error {
  override name = 'ExchangeRefused';
}

/**
 * The exchange could not be done for a reason of this deployment, not of the caller. `outage`: the authorization
 * server is unreachable or too slow (its watch logs that once); otherwise it refuses this server's client
 * credentials or answers something unexpected, and the message tells the operator what to fix.
 */
export class ExchangeUnavailable extends Error {
  override name = 'ExchangeUnavailable';
  constructor(
    message: string,
    readonly outage = false,
  ) {
    super(message);
  }
}

/** Re-exchange this long before the dashboard API token expires, so a call never carries a token about to lapse. */
const REFRESH_MARGIN_MS = 30_000;

interface Exchanged {
  token: string;
  /** On the monotonic clock (base/clock.ts): `expires_in` is a duration, and this instance's wall clock may be set. */
  refreshAtMs: number;
}

/**
 * How the agency MCP server reaches agency data (docs/contract.md#agency-mcp-server): it never forwards the inbound token; it exchanges it
 * (RFC 8693) for a dashboard API token, cached per inbound token until shortly before it expires, and calls the
 * dashboard API with that. In-process when the auth surface runs in this process, else over HTTP to AUTH_URL.
 */
export class DashboardGateway {
  private readonly exchanged: Lru<string, Promise<Exchanged>>;
  private readonly basic: string;
  /** The dashboard API over HTTP (a split deployment): its outages are logged once, not per call. */
  private readonly authServer: DependencyWatch;
  private observed = false;

  constructor(private readonly ctx: AppContext) {
    this.exchanged = new Lru(Math.max(ctx.config.tokenCacheSize, 1));
    const credentials = `${encodeURIComponent(AGENCY_MCP_CLIENT_ID)}:${encodeURIComponent(ctx.config.agencyMcp.clientSecrets[0])}`;
    this.basic = `Basic ${Buffer.from(credentials).toString('base64')}`;
    this.authServer = new DependencyWatch('authorization server (dashboard API)', ctx.log);
  }

  /** The dashboard API token for an inbound access token; throws ExchangeRefused. Concurrent callers share one exchange. */
  async dashboardToken(inbound: string): Promise<string> {
    // Keyed by the token itself, as the verifier's cache is: an exact key, and no hash on every call.
    const key = inbound;
    const cached = this.exchanged.get(key);
    if (cached) {
      const entry = await cached.catch(() => undefined);
      if (entry && entry.refreshAtMs > this.ctx.clock.monotonic()) return entry.token;
    }
    const pending = this.exchange(inbound);
    this.exchanged.set(key, pending);
    try {
      return (await pending).token;
    } catch (e) {
      this.exchanged.delete(key);
      throw e;
    }
  }

  /**
   * Drops the cached exchange of an inbound token and the cached liveness of its connection, after the dashboard API
   * or the exchange refused it: the grant has ended, maybe on another instance, so the next request is refused at
   * authentication instead of trusting this instance's caches for the rest of LIVENESS_CACHE_SECONDS.
   */
  forget(inbound: string, connectionId: string): void {
    this.exchanged.delete(inbound);
    this.ctx.connectionLiveness.forget(connectionId);
  }

  /**
   * Calls one dashboard API operation for an agency MCP request, with its exchanged token, and marks on `caller` what
   * the endpoint must answer instead of any result (its `interruption`): the grant has ended, maybe on another
   * instance (401; what this process cached for the token is forgotten), a dependency is down (503), or the call threw
   * (answered as that error is anywhere: a bug 500, logged).
   */
  async callFor(
    caller: AgencyCall,
    inbound: string,
    id: OperationId,
    input: Record<string, unknown>,
  ): Promise<DashboardApiResponse> {
    const { agencyId, connectionId } = caller.principal;
    let res: DashboardApiResponse;
    try {
      if (!caller.dashboardToken) throw new Error('a dashboard API call before the token exchange');
      res = await this.call(id, caller.dashboardToken, agencyId, input, caller.requestId);
    } catch (e) {
      // Thrown on: the fast path's error handler answers it; through the SDK, which would make it a tool error
      // carrying the error's words, the endpoint does, as the interruption.
      caller.failed = e;
      throw e;
    }
    const message = (res.body as Partial<ErrorBody>).error?.message;
    if (res.status === 401) {
      caller.refused = message ?? 'The connection behind this token has ended';
      this.forget(inbound, connectionId);
    }
    if (res.status === 503) caller.unavailable = message ?? UNAVAILABLE_MESSAGE;
    return res;
  }

  /** Calls one dashboard API operation with a dashboard API token. */
  call(
    id: OperationId,
    token: string,
    agencyId: string,
    input: Record<string, unknown>,
    requestId: string,
  ): Promise<DashboardApiResponse> {
    const local = inProcessDashboardApi(this.ctx);
    if (local) return local.call(id, token, agencyId, input, requestId);
    return this.callOverHttp(OPERATIONS[id], token, agencyId, input, requestId);
  }

  private async exchange(inbound: string): Promise<Exchanged> {
    const body = inProcessDashboardApi(this.ctx)
      ? await this.exchangeInProcess(inbound)
      : await this.exchangeOverHttp(inbound);
    return {
      token: body.access_token,
      refreshAtMs: this.ctx.clock.monotonic() + body.expires_in * 1000 - REFRESH_MARGIN_MS,
    };
  }

  private async exchangeInProcess(inbound: string): Promise<TokenExchangeResponse> {
    try {
      return await exchangeToken(this.ctx, {
        authorization: this.basic,
        subjectToken: inbound,
        subjectTokenType: ACCESS_TOKEN_TYPE,
        targets: [urls.dashboardApi(this.ctx.config)],
        requestedTokenType: undefined,
      });
    } catch (e) {
      if (e instanceof OAuthError && e.code === 'invalid_request') throw new ExchangeRefused(e.description);
      throw e;
    }
  }

  private async exchangeOverHttp(inbound: string): Promise<TokenExchangeResponse> {
    const endpoint = `${urls.issuer(this.ctx.config)}/oauth/token`;
    const res = await this.authServerRequest(endpoint, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: this.basic },
      body: new URLSearchParams({
        grant_type: TOKEN_EXCHANGE_GRANT,
        subject_token: inbound,
        subject_token_type: ACCESS_TOKEN_TYPE,
        audience: urls.dashboardApi(this.ctx.config),
      }).toString(),
    });
    if (!res) throw new ExchangeUnavailable(`the token exchange at ${endpoint} is unavailable`, true);
    const body = res.body as TokenExchangeResponse & { error?: string; error_description?: string };
    if (res.status === 200) return body;
    if (body.error === 'invalid_request')
      throw new ExchangeRefused(body.error_description ?? 'Token exchange refused');
    if (body.error === 'invalid_client') {
      throw new ExchangeUnavailable(
        `the token exchange at ${endpoint} refused this server's client credentials: ` +
          'set the same AGENCY_MCP_CLIENT_SECRET on the agency-mcp and auth processes',
      );
    }
    throw new ExchangeUnavailable(
      `the token exchange at ${endpoint} answered ${res.status} ${body.error ?? ''} ${body.error_description ?? ''}`,
    );
  }

  private async callOverHttp(
    op: Operation,
    token: string,
    agencyId: string,
    input: Record<string, unknown>,
    requestId: string,
  ): Promise<DashboardApiResponse> {
    const rest = { ...input };
    const path = op.path.replace(/:([a-z_]+)/g, (_m, name: string) => {
      const value = encodeURIComponent(String(rest[name] ?? ''));
      delete rest[name];
      return value;
    });
    let url = `${urls.issuer(this.ctx.config)}/api/agencies/${encodeURIComponent(agencyId)}${path}`;
    const init: RequestInit = { method: op.method, headers: { authorization: `Bearer ${token}` } };
    if (op.method === 'GET') {
      const query = new URLSearchParams();
      for (const [k, v] of Object.entries(rest)) if (v !== undefined) query.set(k, String(v));
      if (query.size) url += `?${query}`;
    } else {
      init.headers = { ...init.headers, 'content-type': 'application/json' };
      init.body = JSON.stringify(rest);
    }
    const res = await this.authServerRequest(url, init);
    if (res) return res;
    const unavailable = ApiError.unavailable();
    return { status: unavailable.status, body: unavailable.body(requestId) };
  }

  /**
   * One request to the authorization server, bounded by AUTH_SERVER_TIMEOUT_MS. Its answers are always JSON, so no
   * answer in time, or one that is not JSON (a proxy's 502 page), is an outage of that dependency: reported to its
   * watch (logged once, not per request) and returned as undefined.
   */
  private async authServerRequest(url: string, init: RequestInit): Promise<DashboardApiResponse | undefined> {
    // Reported as `svc_dependency_up{dependency="auth_server"}` once this instance reaches it over HTTP (a split
    // deployment); in-process there is nothing to watch.
    if (!this.observed) {
      this.observed = true;
      this.ctx.metrics.observeDependency('auth_server', this.authServer);
    }
    try {
      const res = await fetch(url, {
        ...init,
        signal: AbortSignal.timeout(this.ctx.config.authServerTimeoutMs),
      });
      const body: unknown = await res.json();
      this.authServer.succeeded();
      return { status: res.status, body };
    } catch (e) {
      this.authServer.failed(new DependencyUnavailable(`${url} did not answer: ${(e as Error).message}`));
      return undefined;
    }
  }
}

/** How long readiness waits for the authorization server, as it waits for the database (app.ts). */
const AUTH_SERVER_READINESS_MS = 2000;

/**
 * Whether a split agency MCP server (`--only agency-mcp`) reaches the authorization server, which it cannot serve a
 * tool call without (the token exchange, the dashboard API): its `GET /health` within the bound. Nothing to check when
 * the auth surface runs in this process. The calls' own outages are logged by the gateway's watch; this only reads.
 */
export async function authServerReadiness(ctx: AppContext): Promise<Record<string, 'up' | 'down'>> {
  if (inProcessDashboardApi(ctx)) return {};
  const timeout = Math.min(ctx.config.authServerTimeoutMs, AUTH_SERVER_READINESS_MS);
  return { auth_server: (await answersHealth(`${urls.issuer(ctx.config)}/health`, timeout)) ? 'up' : 'down' };
}

/**
 * Whether `url` answers 2xx within `timeoutMs`, on a connection of its own closed after it, as a balancer's health
 * check is: a probe on the calls' pooled keep-alive connections would share their fate, and leave one more of them open.
 */
function answersHealth(url: string, timeoutMs: number): Promise<boolean> {
  return new Promise((resolve) => {
    const get = url.startsWith('https:') ? httpsGet : httpGet;
    const request = get(url, { agent: false, headers: { connection: 'close' } }, (res) => {
      res.resume();
      res.on('end', () => done((res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300));
      res.on('error', () => done(false));
    });
    request.on('error', () => done(false));
    // The whole exchange within the bound, not only each wait for a byte.
    const timer = setTimeout(() => request.destroy(), timeoutMs);
    const done = (ok: boolean) => {
      clearTimeout(timer);
      resolve(ok);
    };
  });
}
