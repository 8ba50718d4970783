import type { ClientDescription, ClientRegistry } from '../auth/clients/registry.js';
import type { AppContext } from '../context.js';
import { listAgencyMembers, listMemberships, type MembershipView } from '../domain/agencies.js';
import { type AuditRow, listAuditEvents } from '../domain/audit.js';
import {
  type ConnectionRow,
  listMemberConnections,
  listUserLevelConnections,
} from '../domain/connections.js';
import { roleAllows } from '../domain/permissions.js';

/** What the member dashboard shows, read from the domain; the views in dashboard-view.ts only render it. */

/** A connected application as the member sees it: the grant and how the app is named. */
export interface ConnectedApp {
  connection: ConnectionRow;
  client: ClientDescription;
}

export type AgencyMember = Awaited<ReturnType<typeof listAgencyMembers>>[number];

export interface AgencyDashboard {
  membership: MembershipView;
  apps: ConnectedApp[];
  /** The agency's members, for those who may manage them. */
  members: AgencyMember[] | undefined;
  /** Whether the member may change the agency's settings. */
  canManageSettings: boolean;
  /** The latest audit events: the agency's for managers, the member's own otherwise. */
  audit: AuditRow[];
}

export interface Dashboard {
  memberships: MembershipView[];
  /** The agency shown, when the user belongs to any: the one asked for, else the first. */
  agency: AgencyDashboard | undefined;
  /** Grants of the user's own resources; undefined when there are none and they cannot be granted. */
  accountApps: ConnectedApp[] | undefined;
}

const AUDIT_PAGE = 30;

export async function loadDashboard(
  ctx: AppContext,
  registry: ClientRegistry,
  userId: string,
  wantedAgencyId: unknown,
): Promise<Dashboard> {
  const memberships = await listMemberships(ctx.db, userId);
  const current = memberships.find((m) => m.agency.id === wantedAgencyId) ?? memberships[0];
  return {
    memberships,
    agency: current && (await loadAgency(ctx, registry, current)),
    accountApps: await loadAccountApps(ctx, registry, userId),
  };
}

async function loadAgency(
  ctx: AppContext,
  registry: ClientRegistry,
  membership: MembershipView,
): Promise<AgencyDashboard> {
  const { member, agency } = membership;
  const manager = roleAllows(member.role, 'members:manage');
  return {
    membership,
    apps: await describeAll(registry, await listMemberConnections(ctx.db, member.id)),
    members: manager ? await listAgencyMembers(ctx.db, agency.id) : undefined,
    canManageSettings: roleAllows(member.role, 'settings:manage'),
    audit: await listAuditEvents(ctx.db, {
      agencyId: agency.id,
      ...(manager ? {} : { memberId: member.id }),
      limit: AUDIT_PAGE,
    }),
  };
}

/** Grants of the user's own resources (OAUTH_USER_RESOURCES=on): the REST API and the user MCP server. */
async function loadAccountApps(ctx: AppContext, registry: ClientRegistry, userId: string) {
  const connections = await listUserLevelConnections(ctx.db, userId);
  if (connections.length === 0 && !ctx.config.oauth.userResources) return undefined;
  return describeAll(registry, connections);
}

function describeAll(registry: ClientRegistry, connections: ConnectionRow[]): Promise<ConnectedApp[]> {
  return Promise.all(
    connections.map(async (connection) => ({
      connection,
      client: await registry.describe(connection.client_id),
    })),
  );
}
