import type { ClientDescription, ClientRegistry } from '../auth/clients/registry.js';
import type { AppContext } from '../context.js';
import {
  agencyOfMember,
  listAgencyMembers,
  listMemberships,
  manageableMember,
  MembershipError,
  type MembershipView,
} from '../domain/agencies.js';
import { type AuditEntry, listAuditHistory } from '../domain/audit.js';
import { type ConnectionRow, listLiveConnections } from '../domain/connections.js';
import { effectivePermissions, parseList, type Permission, roleAllows } from '../domain/permissions.js';
import { PageError } from '../web/html.js';

/** What the member pages show, read from the domain; the views only render it. */

/** A connected application as the member sees it: the grant, how the app is named, and what it may do now. */
export interface ConnectedApp {
  connection: ConnectionRow;
  client: ClientDescription;
  /** What the app may do at this moment (docs/contract.md#permissions); empty for the user resources. */
  permissions: Permission[];
}

/** The apps connected to one agency for the member (or to the member's own account). */
export interface AppGroup {
  /** Undefined for the user's own account (OAUTH_USER_RESOURCES). */
  membership: MembershipView | undefined;
  apps: ConnectedApp[];
}

export interface ConnectedAppsPage {
  memberships: MembershipView[];
  /** One group per agency the member belongs to, then the account's when it has any or they can be granted. */
  groups: AppGroup[];
}

/** Every app connected for the user, in every agency and on the account: nothing is behind an agency switch. */
export async function loadConnectedApps(
  ctx: AppContext,
  registry: ClientRegistry,
  userId: string,
): Promise<ConnectedAppsPage> {
  const memberships = await listMemberships(ctx.db, userId);
  const live = await listLiveConnections(ctx.db, userId, ctx.clock.now());
  const byAgency = memberships.map((m) => live.filter((c) => c.member_id === m.member.id));
  const account = live.filter((c) => c.agency_id === null);
  const clients = await registry.describeAll([...byAgency.flat(), ...account].map((c) => c.client_id));
  const app = (connection: ConnectionRow, permissions: Permission[]): ConnectedApp => ({
    connection,
    client: clients.get(connection.client_id)!,
    permissions,
  });
  const groups: AppGroup[] = memberships.map((membership, i) => ({
    membership,
    apps: byAgency[i]!.map((c) => app(c, permissionsNow(c, membership))),
  }));
  if (account.length > 0 || ctx.config.oauth.userResources) {
    groups.push({ membership: undefined, apps: account.map((c) => app(c, [])) });
  }
  // Agencies where the member has apps first, most recently used first: the page opens where the apps are.
  groups.sort((a, b) => lastActivity(b) - lastActivity(a));
  return { memberships, groups };
}

/** A connected app with the group it is listed in (an agency, or the member's own account). */
export interface DisconnectionPage {
  app: ConnectedApp;
  membership: MembershipView | undefined;
}

/**
 * What disconnecting an app asks before it acts: the app as Connected apps lists it, or a 404 page for a connection
 * that is not the member's, or not live.
 */
export async function loadDisconnection(
  ctx: AppContext,
  registry: ClientRegistry,
  userId: string,
  connectionId: string,
): Promise<DisconnectionPage> {
  const { groups } = await loadConnectedApps(ctx, registry, userId);
  for (const group of groups) {
    const app = group.apps.find((a) => a.connection.id === connectionId);
    if (app) return { app, membership: group.membership };
  }
  throw new PageError(404, 'Not found', 'No such connection.');
}

function permissionsNow(c: ConnectionRow, m: MembershipView): Permission[] {
  return effectivePermissions({
    ceiling: parseList(c.ceiling),
    role: m.member.role,
    scopes: new Set(parseList(c.scopes)),
    agencyAllowsWrite: m.agency.agent_write_enabled === 1,
  });
}

const lastActivity = (g: AppGroup) =>
  Math.max(-1, ...g.apps.map((a) => a.connection.last_used_at ?? a.connection.created_at));

/** An agency page's frame: the member's memberships (to switch agency) and the one shown. */
export interface AgencyPage {
  memberships: MembershipView[];
  current: MembershipView;
}

/** The signed-in user's membership in the agency of the page, or a 404 page (not theirs, or no such agency). */
export async function loadAgencyPage(ctx: AppContext, userId: string, agencyId: string): Promise<AgencyPage> {
  const memberships = await listMemberships(ctx.db, userId);
  const current = memberships.find((m) => m.agency.id === agencyId);
  if (!current) throw new PageError(404, 'Not found', 'You are not a member of that agency.');
  return { memberships, current };
}

export type AgencyMember = Awaited<ReturnType<typeof listAgencyMembers>>[number];

export interface MembersPage extends AgencyPage {
  members: AgencyMember[];
  /** Owners and admins change roles and remove members; everyone may see who is a member. */
  canManage: boolean;
}

export async function loadMembers(ctx: AppContext, userId: string, agencyId: string): Promise<MembersPage> {
  const page = await loadAgencyPage(ctx, userId, agencyId);
  return {
    ...page,
    members: await listAgencyMembers(ctx.db, agencyId),
    canManage: roleAllows(page.current.member.role, 'members:manage'),
  };
}

export interface RemovalPage extends AgencyPage {
  /** The member the signed-in owner or admin is asked to confirm removing. */
  member: { id: string; username: string; role: string };
}

/**
 * What removing a member asks before it acts: the agency and the member, when the signed-in user may remove them (a
 * 404 page for no such member or an agency not theirs, a 403 page when their role may not).
 */
export async function loadRemoval(ctx: AppContext, userId: string, memberId: string): Promise<RemovalPage> {
  const agencyId = await agencyOfMember(ctx.db, memberId);
  if (agencyId === undefined) throw new PageError(404, 'Not found', 'No such member.');
  const page = await loadAgencyPage(ctx, userId, agencyId);
  try {
    const { id, username, role } = await manageableMember(ctx.db, page.current.member, memberId);
    return { ...page, member: { id, username, role } };
  } catch (e) {
    if (e instanceof MembershipError) throw new PageError(403, 'Not allowed', e.message);
    throw e;
  }
}

export interface SettingsPage extends AgencyPage {
  canManage: boolean;
}

export async function loadSettings(ctx: AppContext, userId: string, agencyId: string): Promise<SettingsPage> {
  const page = await loadAgencyPage(ctx, userId, agencyId);
  return { ...page, canManage: roleAllows(page.current.member.role, 'settings:manage') };
}

export interface HistoryPage extends AgencyPage {
  /** The agency's events for those who manage members, the member's own otherwise. */
  events: AuditEntry[];
  wholeAgency: boolean;
  appNames: ReadonlyMap<string, string>;
}

const HISTORY_PAGE = 30;

export async function loadHistory(
  ctx: AppContext,
  registry: ClientRegistry,
  userId: string,
  agencyId: string,
): Promise<HistoryPage> {
  const page = await loadAgencyPage(ctx, userId, agencyId);
  const wholeAgency = roleAllows(page.current.member.role, 'members:manage');
  const events = await listAuditHistory(ctx.db, {
    agencyId,
    ...(wholeAgency ? {} : { memberId: page.current.member.id }),
    limit: HISTORY_PAGE,
  });
  const clients = await registry.describeAll(events.flatMap((e) => (e.client_id ? [e.client_id] : [])));
  // A registration no longer stored has no name to show: the sentence says "an application", never its id.
  const known = [...clients].filter(([, client]) => client.kind !== undefined);
  const appNames = new Map(known.map(([id, client]) => [id, client.name]));
  return { ...page, events, wholeAgency, appNames };
}
