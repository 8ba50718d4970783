import type { Kysely } from 'kysely';
import { activeMembership, findAgency } from '../domain/agencies.js';
import { findActiveConnectionOfApp } from '../domain/connections.js';
import {
  effectivePermissions,
  isPermission,
  isWritePermission,
  offerablePermissions,
  parseList,
  type Permission,
  type Role,
  roleHasWrite,
} from '../domain/permissions.js';
import { SCOPES } from '../domain/scopes.js';
import type { Database } from '../store/schema.js';
import { PageError } from '../web/html.js';
import type { AuthorizationRequest } from './authorization-request.js';

/**
 * Consent (docs/contract.md#the-oauth-flow): what the member is offered for a request, and what their answer grants.
 * The member chooses which of their own permissions the agent may use (the ceiling); write access is offered only
 * when it was asked for, the member's role can write and the agency allows agents to write.
 */
export interface ConsentModel {
  role: Role | undefined;
  agency: { id: string; name: string } | undefined;
  memberId: string | undefined;
  /** The member's permissions the application may be allowed to use. */
  offered: Permission[];
  /** Whether a write permission is among them (asked for, the role can write, the agency allows it). */
  writeOffered: boolean;
  /** Why write access is not offered although it was asked for: the member's role, or the agency's setting. */
  writeRefusal: 'role' | 'agency' | undefined;
  /**
   * The app's live connection in this agency when it is already connected (this consent will replace it); loaded for
   * the page only (`withExisting`).
   */
  existing?: ExistingConnection | undefined;
}

/** What an app already connected may do, so a re-authorization (a step-up, a reconnect) can say what changes. */
export interface ExistingConnection {
  since: number;
  /** The permissions it may use now. */
  permissions: Permission[];
}

/**
 * The consent on offer for this request to this user in the chosen agency (none for the user resources). With
 * `withExisting` (the page, at time `now`), also what the app's live connection may do today.
 */
export async function consentModel(
  db: Kysely<Database>,
  req: AuthorizationRequest,
  userId: string,
  agencyId: string | undefined,
  withExisting?: { now: number },
): Promise<ConsentModel> {
  const writeRequested = req.scopes.includes(SCOPES.agencyWrite);
  if (req.resource.kind === 'user') {
    return {
      role: undefined,
      agency: undefined,
      memberId: undefined,
      offered: [],
      writeOffered: false,
      writeRefusal: undefined,
    };
  }
  const member = agencyId ? await activeMembership(db, userId, agencyId) : undefined;
  const agency = member ? await findAgency(db, member.agency_id) : undefined;
  if (!member || !agency) {
    throw new PageError(403, 'Not a member', 'You are not an active member of that agency.');
  }
  const agencyAllowsWrite = agency.agent_write_enabled === 1;
  const offered = offerablePermissions({ role: member.role, wantsWrite: writeRequested, agencyAllowsWrite });
  return {
    role: member.role,
    agency: { id: agency.id, name: agency.name },
    memberId: member.id,
    offered,
    writeOffered: offered.some(isWritePermission),
    writeRefusal: writeRefusalOf(writeRequested, member.role, agencyAllowsWrite),
    ...(withExisting && {
      existing: await existingConnection(db, req, userId, member.role, agency, withExisting.now),
    }),
  };
}

async function existingConnection(
  db: Kysely<Database>,
  req: AuthorizationRequest,
  userId: string,
  role: Role,
  agency: { id: string; agent_write_enabled: number },
  now: number,
): Promise<ExistingConnection | undefined> {
  const row = await findActiveConnectionOfApp(db, {
    user_id: userId,
    agency_id: agency.id,
    client_id: req.client.clientId,
    resource: req.resource.uri,
  });
  // An expired connection is no longer the app's: its tokens are refused (isConnectionLive), so this is a new one.
  if (!row || row.expires_at <= now) return undefined;
  const permissions = effectivePermissions({
    ceiling: parseList(row.ceiling),
    role,
    scopes: new Set(parseList(row.scopes)),
    agencyAllowsWrite: agency.agent_write_enabled === 1,
  });
  return { since: row.created_at, permissions };
}

function writeRefusalOf(
  requested: boolean,
  role: Role,
  agencyAllowsWrite: boolean,
): ConsentModel['writeRefusal'] {
  if (!requested) return undefined;
  if (!roleHasWrite(role)) return 'role';
  if (!agencyAllowsWrite) return 'agency';
  return undefined;
}

/** Allow or Deny, read before anything else: a Deny needs no model of what would have been granted. */
export function consentAnswer(form: URLSearchParams): 'allow' | 'deny' {
  const decision = form.getAll('decision');
  if (decision.length !== 1 || (decision[0] !== 'allow' && decision[0] !== 'deny')) {
    throw new PageError(400, 'Bad request', 'Choose Allow or Deny.');
  }
  return decision[0];
}

/**
 * Reads an allowing consent form against what was offered: a permission not offered is refused, and allowing nothing
 * is not an answer. RFC 6749 §3.3: the granted scope may be narrower than requested — write only when it can be used.
 */
export function decideConsent(
  form: URLSearchParams,
  req: AuthorizationRequest,
  model: ConsentModel,
): { scopes: string[]; ceiling: Permission[] } {
  const ticked = form.getAll('ceiling');
  for (const t of ticked) {
    if (!isPermission(t) || !model.offered.includes(t)) {
      throw new PageError(400, 'Bad request', `The permission ${t} cannot be granted here.`);
    }
  }
  const ceiling = model.offered.filter((p) => ticked.includes(p));
  if (req.resource.kind === 'agency' && ceiling.length === 0) {
    throw new PageError(400, 'Nothing to allow', 'Tick at least one permission, or choose Deny.');
  }
  // The ceiling is a subset of what was offered, so a write permission in it was offered.
  const grantsWrite = ceiling.some(isWritePermission);
  const scopes = req.scopes.filter((s) => s !== SCOPES.agencyWrite || grantsWrite);
  // Hosts that never ask for offline_access lose the connection when the 1-hour access token expires. RFC 6749 §3.3
  // lets the granted scope differ from the requested one (the token response then names it), and RFC 6749 §5.1 leaves
  // issuing a refresh token to the server: the member may grant "stay connected" on consent.
  if (!scopes.includes(SCOPES.offline) && form.get('stay_connected') === 'on') scopes.push(SCOPES.offline);
  return { scopes, ceiling };
}
