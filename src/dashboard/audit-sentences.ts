import type { AuditEntry } from '../domain/audit.js';
import { isPermission, PERMISSION_LABELS } from '../domain/permissions.js';
import { type Html, isolated, lowerFirst, markup } from '../web/html.js';

/**
 * Audit events as sentences a member reads: who did what to whom, with application names, never ids. Each event
 * type has one sentence; the names come from the event's actor and member (usernames) and its client (the app's
 * name as the member pages show it).
 */

/** The names an event refers to by id. */
export interface AuditNames {
  /** The application's name for a client id. */
  app(clientId: string): string;
}

interface Detail {
  reason?: string;
  from?: string;
  to?: string;
  role?: string;
  removed?: string[];
  agent_write_enabled?: boolean;
  scopes?: string[];
  /** A consent given while the app was connected already (a re-authorization). */
  update?: boolean;
}

const someone = 'someone';

/** "linus's", "Planner Bot's" — the possessive of a username or an app's name. */
const possessive = (name: string | Html) => markup`${name}'s`;

/** Words for what a narrowing took away: "create and change clients, add notes". */
function removedWords(removed: string[] | undefined): string {
  const words = (removed ?? []).filter(isPermission).map((p) => lowerFirst(PERMISSION_LABELS[p]));
  return words.length ? words.join(', ') : 'some of what it could do';
}

/** Why a connection ended, as the end of "… was disconnected" or of "… ended". */
const ENDINGS: Record<string, (actor: string, member: string) => string> = {
  disconnected: (actor) => `was disconnected by ${actor}`,
  revoked_by_client: () => 'was ended by the application itself (it revoked its token)',
  member_removed: (_actor, member) => `was disconnected because ${member} was removed from the agency`,
  ended_by_operator: (_actor, member) =>
    `was disconnected by the service's operator, with every session of ${member}`,
  client_ended_by_operator: () =>
    "was disconnected by the service's operator, with every connection of that application",
};

export function auditSentence(e: AuditEntry, names: AuditNames): Html {
  const d = JSON.parse(e.detail) as Detail;
  const actor = e.actor_username ?? someone;
  const member = e.member_username ?? 'a former member';
  // The app's name is its author's, in any script: isolated, so it cannot reorder the sentence around it.
  const app = e.client_id ? isolated(names.app(e.client_id)) : 'an application';
  /** "Planner Bot" when the member did it themself, else "grace's Planner Bot" (whose connection it is). */
  const whoseApp =
    e.actor_username && e.actor_username === e.member_username ? app : markup`${possessive(member)} ${app}`;
  switch (e.type) {
    case 'connection.created': {
      const what = d.scopes?.includes('agency:mcp:write') ? 'to read and make changes' : 'to read';
      return d.update
        ? markup`${member} updated ${possessive(app)} access ${what}`
        : markup`${member} connected ${app} ${what}`;
    }
    case 'connection.revoked': {
      const ending = ENDINGS[d.reason ?? ''] ?? (() => 'was disconnected');
      return markup`${whoseApp} ${ending(actor, member)}`;
    }
    case 'connection.refresh_reuse_detected':
      return markup`A reused refresh token ended the connection of ${app} (${possessive(member)})`;
    case 'connection.code_replay_detected':
      return markup`A reused authorization code ended the connection of ${app} (${possessive(member)})`;
    case 'connection.narrowed':
      return markup`${possessive(member)} ${app} can no longer ${removedWords(d.removed)}: ${possessive(member)} role became ${d.role ?? 'narrower'}`;
    case 'member.role_changed':
      return markup`${actor} changed ${possessive(member)} role from ${d.from ?? '?'} to ${d.to ?? '?'}`;
    case 'member.removed':
      return markup`${actor} removed ${member}${d.role ? ` (${d.role})` : ''} from the agency`;
    case 'agency.agent_write_changed':
      return d.agent_write_enabled
        ? markup`${actor} allowed connected apps to make changes`
        : markup`${actor} stopped connected apps from making changes`;
    default:
      return markup`${e.type.replace(/[._]/g, ' ')} (${actor})`;
  }
}
