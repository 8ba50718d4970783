import { markup } from '../web/html.js';

/** What the page says after a form action sent the browser back to it (`?done=`). */
const NOTICES = {
  disconnected: 'The application was disconnected.',
  'role-changed': "The role was changed; that member's connected apps were narrowed to match.",
  'member-removed': 'The member was removed; their connected apps were disconnected.',
  'settings-saved': 'Settings saved.',
} as const satisfies Record<string, string>;

export type Notice = keyof typeof NOTICES;

export function noticeView(notice: unknown) {
  const text = typeof notice === 'string' ? (NOTICES as Record<string, string>)[notice] : undefined;
  return text ? markup`<p class="notice" role="status">${text}</p>` : '';
}
