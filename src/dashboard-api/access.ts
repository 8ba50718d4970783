import type { AppContext } from '../context.js';
import { urls } from '../context.js';
import { activeMembership } from '../domain/agencies.js';
import { currentGrant } from '../domain/connections.js';
import { effectivePermissions, type Permission, type Role, rolePermissions } from '../domain/permissions.js';
import { BearerError } from '../http/bearer.js';
import { ApiError } from '../http/errors.js';
import { authenticationError } from '../http/rest-auth.js';
import { type DashboardPrincipal, TokenError } from '../tokens/verifier.js';

/** Who calls the dashboard API, for which agency, and what they may do there at this moment. */
export interface CallerAccess {
  userId: string;
  agencyId: string;
  memberId: string;
  role: Role;
  /** The connection (grant) of an agent, or null for the member's own signed-in session. */
  connectionId: string | null;
  permissions: ReadonlySet<Permission>;
}

/**
 * Access of a dashboard API token (docs/contract.md#agency-mcp-server). The connection, the member and the agency are read on every call, so a
 * disconnect, a role change or a removal takes effect on the next call; permissions = what the token was minted
 * with ∩ the connection's effective permissions now (docs/contract.md#permissions).
 */
export async function accessOfDashboardToken(
  ctx: AppContext,
  token: string | undefined,
  agencyId: string,
): Promise<CallerAccess> {
  const audience = urls.dashboardApi(ctx.config);
  const principal = await verifyDashboardToken(ctx, token, audience);
  const row = await currentGrant(ctx.store.sql, principal.connectionId);
  const now = ctx.clock.now();
  const live =
    row !== undefined &&
    row.status === 'active' &&
    row.expires_at > now &&
    row.member_status === 'active' &&
    row.member_id === principal.memberId &&
    row.agency_id === principal.agencyId;
  if (!live) throw authenticationError('revoked', 'The connection behind this token has ended', audience);
  assertSameAgency(principal.agencyId, agencyId);
  return {
    userId: principal.userId,
    agencyId,
    memberId: principal.memberId,
    role: row.role,
    connectionId: principal.connectionId,
    permissions: permissionsOf(principal, row.ceiling, row.role, row.agent_write_enabled === 1),
  };
}

/** What the permissions of a dashboard token were last computed from, and the result. */
interface ComputedPermissions {
  ceiling: string;
  role: Role;
  agencyAllowsWrite: boolean;
  permissions: ReadonlySet<Permission>;
}

/**
 * The permissions of each verified dashboard token, with the grant they were computed from. An agent's calls present
 * the same token (its verified principal is cached, the same object call after call) and find the same grant, so the
 * set is computed again only when the ceiling, the role or the agency's write switch read for this call differ:
 * building it (a split, three arrays, two sets) was the largest allocation of an agency tool call.
 */
const computedPermissions = new WeakMap<DashboardPrincipal, ComputedPermissions>();

function permissionsOf(
  principal: DashboardPrincipal,
  ceiling: string,
  role: Role,
  agencyAllowsWrite: boolean,
): ReadonlySet<Permission> {
  const known = computedPermissions.get(principal);
  if (known?.ceiling === ceiling && known.role === role && known.agencyAllowsWrite === agencyAllowsWrite)
    return known.permissions;
  const effective = effectivePermissions({
    ceiling: ceiling.split(' '),
    role,
    scopes: principal.scopes,
    agencyAllowsWrite,
  });
  const permissions = new Set(effective.filter((p) => principal.permissions.has(p)));
  computedPermissions.set(principal, { ceiling, role, agencyAllowsWrite, permissions });
  return permissions;
}

/** Access of the member's own signed-in web session (read-only use by the dashboard pages): the role's permissions. */
export async function accessOfMember(
  ctx: AppContext,
  userId: string,
  agencyId: string,
): Promise<CallerAccess> {
  const member = await activeMembership(ctx.db, userId, agencyId);
  if (!member) throw notThisAgency();
  return {
    userId,
    agencyId,
    memberId: member.id,
    role: member.role,
    connectionId: null,
    permissions: new Set(rolePermissions(member.role)),
  };
}

async function verifyDashboardToken(
  ctx: AppContext,
  token: string | undefined,
  audience: string,
): Promise<DashboardPrincipal> {
  try {
    if (token === undefined)
      throw new BearerError('missing', 'No bearer token; send Authorization: Bearer <token>');
    return await ctx.verifier.verifyDashboard(token, audience);
  } catch (e) {
    if (!(e instanceof BearerError || e instanceof TokenError)) throw e;
    // An agent's access token (at+jwt) lands here too: it is of another kind and for another audience.
    throw authenticationError(e.failure, e.message, audience);
  }
}

/** A token is bound to one agency (docs/contract.md#authentication); another agency's data "does not exist or is not yours". */
function assertSameAgency(bound: string, asked: string): void {
  if (bound !== asked) throw notThisAgency();
}

const notThisAgency = () =>
  new ApiError('resource_not_found', 'No such agency, or not one this credential is bound to', {
    param: 'agency_id',
  });

/** docs/contract.md#errors: a 403 naming the permission the caller lacks (docs/contract.md#permissions effective permissions). */
export function assertPermission(access: CallerAccess, permission: Permission): void {
  if (access.permissions.has(permission)) return;
  const who = access.connectionId ? 'this connection' : 'your role';
  throw new ApiError(
    'missing_permission',
    `This needs the ${permission} permission, which ${who} does not have`,
    {
      param: permission,
    },
  );
}
