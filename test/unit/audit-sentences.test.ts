import { describe, expect, it } from 'vitest';
import type { AuditEntry } from '../../src/domain/audit.js';
import { auditSentence } from '../../src/dashboard/audit-sentences.js';
import { relativeTime } from '../../src/web/when.js';
import { textOf } from '../helpers/page-text.js';

/** The history as a member reads it: actor, subject and app by name, never an id or an event code. */

const entry = (
  type: string,
  o: Omit<Partial<AuditEntry>, 'detail'> & { detail?: object } = {},
): AuditEntry => ({
  id: 'evt_1',
  type,
  agency_id: 'agy_1',
  actor_user_id: 'usr_a',
  member_id: 'mem_1',
  connection_id: null,
  created_at: 0,
  actor_username: 'ada',
  member_username: 'grace',
  // As listAuditHistory resolves it: the connection's client, else the one the event recorded.
  client_id: (o.detail as { client_id?: string } | undefined)?.client_id ?? null,
  ...o,
  detail: JSON.stringify(o.detail ?? {}),
});
const names = {
  app: (id: string) => ({ dcr_1: 'MCP Inspector', cli_2: 'Claude Code' })[id] ?? 'an application',
};
const say = (e: AuditEntry) => textOf(auditSentence(e, names));

describe('audit sentences', () => {
  it.each([
    [
      entry('member.role_changed', {
        detail: { from: 'viewer', to: 'member' },
        member_username: 'linus',
        actor_username: 'grace',
      }),
      "grace changed linus's role from viewer to member",
    ],
    [
      entry('connection.revoked', {
        detail: { reason: 'disconnected', client_id: 'dcr_1' },
        member_username: 'ada',
      }),
      'MCP Inspector was disconnected by ada',
    ],
    [
      entry('connection.revoked', { detail: { reason: 'disconnected', client_id: 'dcr_1' } }),
      "grace's MCP Inspector was disconnected by ada",
    ],
    [
      entry('connection.refresh_reuse_detected', { client_id: 'cli_2', actor_username: null }),
      "A reused refresh token ended the connection of Claude Code (grace's)",
    ],
    [
      entry('connection.revoked', { detail: { reason: 'member_removed', client_id: 'dcr_1' } }),
      "grace's MCP Inspector was disconnected because grace was removed from the agency",
    ],
    [
      entry('connection.revoked', {
        detail: { reason: 'revoked_by_client', client_id: 'dcr_1' },
        actor_username: null,
      }),
      "grace's MCP Inspector was ended by the application itself (it revoked its token)",
    ],
    [
      entry('connection.revoked', {
        detail: { reason: 'ended_by_operator', client_id: 'dcr_1' },
        actor_username: null,
      }),
      "grace's MCP Inspector was disconnected by the service's operator, with every session of grace",
    ],
    [
      entry('connection.revoked', {
        detail: { reason: 'client_ended_by_operator', client_id: 'dcr_1' },
        actor_username: null,
      }),
      "grace's MCP Inspector was disconnected by the service's operator, with every connection of that application",
    ],
    [
      entry('connection.created', {
        detail: { client_id: 'dcr_1', scopes: ['agency:mcp:read', 'agency:mcp:write'] },
        actor_username: 'grace',
      }),
      'grace connected MCP Inspector to read and make changes',
    ],
    [
      entry('connection.created', {
        detail: { client_id: 'dcr_1', scopes: ['agency:mcp:read'], update: true },
        actor_username: 'grace',
      }),
      "grace updated MCP Inspector's access to read",
    ],
    [
      entry('connection.narrowed', {
        client_id: 'dcr_1',
        detail: { removed: ['clients:write', 'notes:write'], role: 'viewer' },
      }),
      "grace's MCP Inspector can no longer create and change clients, add notes: grace's role became viewer",
    ],
    [
      entry('member.removed', { detail: { role: 'viewer' }, member_username: 'linus' }),
      'ada removed linus (viewer) from the agency',
    ],
    [
      entry('agency.agent_write_changed', {
        detail: { agent_write_enabled: false },
        member_id: null,
        member_username: null,
      }),
      'ada stopped connected apps from making changes',
    ],
  ])('%#: %s', (e, sentence) => {
    expect(say(e)).toBe(sentence);
  });

  it("isolates the app's name, which its author wrote in any script, and escapes every name", () => {
    const sentence = auditSentence(
      entry('connection.created', { client_id: 'dcr_1', actor_username: 'grace' }),
      {
        app: () => '<b>Bot</b>',
      },
    );
    expect(sentence.value).toBe('grace connected <bdi>&lt;b&gt;Bot&lt;/b&gt;</bdi> to read');
  });

  it('never shows an id or an event code', () => {
    const sentence = say(
      entry('connection.revoked', { detail: { reason: 'code_replay', client_id: 'dcr_unknown' } }),
    );
    expect(sentence).not.toMatch(/dcr_|mem_|usr_|connection\./);
  });
});

describe('times as a person reads them', () => {
  const now = Date.UTC(2026, 10, 23, 18, 0);
  it.each([
    [now - 20_000, 'just now'],
    [now - 60_000, '1 minute ago'],
    [now - 5 * 60_000, '5 minutes ago'],
    [now - 3 * 3600_000, '3 hours ago'],
    [now - 30 * 3600_000, 'yesterday'],
    [now - 4 * 86_400_000, '4 days ago'],
    [Date.UTC(2026, 0, 2, 9), '2 Jan 2026'],
  ])('%#: %s', (ms, text) => {
    expect(relativeTime(ms, now)).toBe(text);
  });
});
