import { markup } from './html.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

const DATE = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'UTC',
  day: 'numeric',
  month: 'short',
  year: 'numeric',
});
const DATE_TIME = new Intl.DateTimeFormat('en-GB', {
  timeZone: 'UTC',
  day: 'numeric',
  month: 'short',
  year: 'numeric',
  hour: '2-digit',
  minute: '2-digit',
});

const plural = (n: number, unit: string) => `${n} ${unit}${n === 1 ? '' : 's'} ago`;

/**
 * How long ago, as a person says it: "just now", "5 minutes ago", "3 hours ago", "yesterday", "4 days ago", then the
 * date ("23 Nov 2026"). The pages carry no script to learn the reader's time zone, so a relative time is the one that
 * needs none; the exact time (UTC) is in the element's `datetime` and `title`.
 */
export function relativeTime(ms: number, now: number): string {
  const ago = Math.max(0, now - ms);
  if (ago < MINUTE) return 'just now';
  if (ago < HOUR) return plural(Math.floor(ago / MINUTE), 'minute');
  if (ago < DAY) return plural(Math.floor(ago / HOUR), 'hour');
  if (ago < 2 * DAY) return 'yesterday';
  if (ago < 7 * DAY) return plural(Math.floor(ago / DAY), 'day');
  return DATE.format(ms);
}

/** A `<time>` element: relative text, exact UTC time in `datetime` and `title`; "never" for no time. */
export function timeView(ms: number | null, now: number) {
  if (ms === null) return markup`never`;
  const exact = `${DATE_TIME.format(ms)} UTC`;
  return markup`<time datetime="${new Date(ms).toISOString()}" title="${exact}">${relativeTime(ms, now)}</time>`;
}

/** A calendar date, "23 Nov 2026" (UTC). */
export const dateLabel = (ms: number): string => DATE.format(ms);
