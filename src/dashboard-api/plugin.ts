import type { FastifyInstance, FastifyRequest } from 'fastify';
import { type AppContext, urls } from '../context.js';
import { BearerError, extractBearer } from '../http/bearer.js';
import { ApiError } from '../http/errors.js';
import { authenticationError } from '../http/rest-auth.js';
import { apiErrorOf } from '../http/rest-errors.js';
import { accessOfDashboardToken, accessOfMember, type CallerAccess } from './access.js';
import { invoke, OPERATIONS, type Operation, type OperationId } from './operations.js';

const AGENCY_ID = /^agy_[A-Za-z0-9]{1,64}$/;

/**
 * The dashboard API at `{AUTH_URL}/api/agencies/{agency_id}/...` (docs/contract.md#agency-mcp-server), JSON in the REST conventions
 * of docs/contract.md#rest-api with docs/contract.md#errors errors (the auth surface's `restErrors`). Accepts the dashboard API token minted by the
 * token exchange, and, for reads only (no CSRF exposure), the member's own signed-in web session. An agent's access
 * token is refused: it is another kind of token, for another audience.
 */
export async function dashboardApiRoutes(app: FastifyInstance, ctx: AppContext): Promise<void> {
  IN_PROCESS.set(ctx, new InProcessDashboardApi(ctx));
  for (const op of Object.values(OPERATIONS) as Operation[]) {
    app.route({
      method: op.method,
      url: `/api/agencies/:agency_id${op.path}`,
      handler: async (request, reply) => {
        const params = request.params as Record<string, string>;
        const access = await accessOfRequest(ctx, request, agencyIdOf(params['agency_id']));
        const input = { ...inputOf(request, op), ...pathIds(params) };
        const body = await invoke(ctx, op, access, input);
        return reply
          .code(op.status ?? 200)
          .header('cache-control', 'no-store')
          .send(body);
      },
    });
  }
}

function agencyIdOf(raw: string | undefined): string {
  if (raw === undefined || !AGENCY_ID.test(raw)) {
    throw new ApiError('resource_not_found', 'No such agency', { param: 'agency_id' });
  }
  return raw;
}

async function accessOfRequest(
  ctx: AppContext,
  request: FastifyRequest,
  agencyId: string,
): Promise<CallerAccess> {
  const audience = urls.dashboardApi(ctx.config);
  if (request.headers.authorization === undefined && request.method === 'GET') {
    const user = await ctx.webSessions.currentUser(request);
    if (user) return accessOfMember(ctx, user.userId, agencyId);
  }
  let token: string;
  try {
    token = extractBearer(request.raw);
  } catch (e) {
    if (!(e instanceof BearerError)) throw e;
    throw authenticationError(e.failure, e.message, audience);
  }
  return accessOfDashboardToken(ctx, token, agencyId);
}

function pathIds(params: Record<string, string>): Record<string, string> {
  const { agency_id: _agency, ...ids } = params;
  return ids;
}

/** Query (GET) or JSON body (POST/PATCH) as one input object; `limit` is the only number in a query. */
function inputOf(request: FastifyRequest, op: Operation): Record<string, unknown> {
  if (op.method !== 'GET') {
    const body = request.body ?? {};
    if (typeof body !== 'object' || Array.isArray(body)) {
      throw new ApiError('invalid_request', 'Send a JSON object as the body');
    }
    return body as Record<string, unknown>;
  }
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(request.query as Record<string, unknown>)) {
    if (typeof v !== 'string') throw new ApiError('invalid_request', `${k}: send it once`, { param: k });
    out[k] = k === 'limit' && /^\d{1,6}$/.test(v) ? Number(v) : v;
  }
  return out;
}

export interface DashboardApiResponse {
  status: number;
  body: unknown;
}

/**
 * The same operations, checks and error objects as the HTTP routes, called without a loopback HTTP hop when the agency
 * MCP server shares the process with the auth surface. The caller still presents the dashboard API token.
 */
export class InProcessDashboardApi {
  constructor(private readonly ctx: AppContext) {}

  async call(
    id: OperationId,
    token: string,
    agencyId: string,
    input: Record<string, unknown>,
    requestId: string,
  ): Promise<DashboardApiResponse> {
    const op: Operation = OPERATIONS[id];
    try {
      const access = await accessOfDashboardToken(this.ctx, token, agencyIdOf(agencyId));
      return { status: op.status ?? 200, body: await invoke(this.ctx, op, access, input) };
    } catch (e) {
      // Answered as the HTTP route answers it (http/rest-errors.ts). An outage (503) is logged once by the store's
      // watch, a refused value (400) is the caller's; only a bug is logged here, with its stack.
      const error = apiErrorOf(e);
      if (error.status === 500 && !(e instanceof ApiError)) {
        this.ctx.log.error({ err: e, request_id: requestId }, 'dashboard API call failed');
      }
      return { status: error.status, body: error.body(requestId) };
    }
  }
}

const IN_PROCESS = new WeakMap<AppContext, InProcessDashboardApi>();

/** The dashboard API of this process, when the auth surface runs here. */
export const inProcessDashboardApi = (ctx: AppContext): InProcessDashboardApi | undefined =>
  IN_PROCESS.get(ctx);
