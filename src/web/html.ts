/** Plain server-rendered HTML (no JavaScript): escaping, the page frame, and the page error type. */

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

export const esc = (v: unknown): string => String(v ?? '').replace(/[&<>"']/g, (c) => ESCAPES[c]!);

/** A tagged template whose interpolations are escaped unless they are `Html` already (not named `html`, so formatters leave the markup as written). */
export class Html {
  constructor(readonly value: string) {}
  toString(): string {
    return this.value;
  }
}

export function markup(strings: TemplateStringsArray, ...values: unknown[]): Html {
  let out = strings[0]!;
  values.forEach((v, i) => {
    out += render(v) + strings[i + 1]!;
  });
  return new Html(out);
}

function render(v: unknown): string {
  if (v instanceof Html) return v.value;
  if (Array.isArray(v)) return v.map(render).join('');
  if (v === undefined || v === null || v === false) return '';
  return esc(v);
}

export const raw = (s: string): Html => new Html(s);

/**
 * A name someone else wrote (an app's `client_name`, an agency's name) placed inside a sentence, isolated (HTML's
 * `bdi`; Unicode's bidirectional isolates, UAX #9 §2.7): its direction is its own, so a right-to-left name keeps its
 * punctuation at its own end and draws no bracket, number or word beside it into its run.
 */
export const isolated = (name: string): Html => markup`<bdi>${name}</bdi>`;

/** "See clients" → "see clients": a label placed inside a sentence. */
export const lowerFirst = (s: string): string => s.charAt(0).toLowerCase() + s.slice(1);

/** A title as the browser's tab shows it: its text, escaped, without tags (`<title>` holds no markup). */
const plainTitle = (title: string | Html): string => render(title).replace(/<[^>]*>/g, '');

export function layout(o: {
  /** Markup only to isolate a name inside it (`isolated`); the page's heading keeps it, the tab's title does not. */
  title: string | Html;
  body: Html;
  signedInAs?: string | undefined;
  csrf?: string;
}): string {
  const nav =
    o.signedInAs && o.csrf
      ? markup`<nav aria-label="Account"><a href="/dashboard">Dashboard</a>
  <span>Signed in as <strong>${o.signedInAs}</strong></span>
  <form method="post" action="/sign-out" class="inline"><input type="hidden" name="csrf" value="${o.csrf}"><button type="submit">Sign out</button></form></nav>`
      : '';
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>${plainTitle(o.title)}</title>
<link rel="stylesheet" href="/assets/dashboard.css">
</head>
<body>
<header><p class="brand">Svc agent access</p>${nav}</header>
<main>
<h1>${render(o.title)}</h1>
${o.body.value}
</main>
</body>
</html>
`;
}

/** An error shown as a page (errors before the redirect URI is trusted, bad forms, forbidden actions). */
export class PageError extends Error {
  override name = 'PageError';
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * The one stylesheet. Every page works from 320 px up without horizontal scrolling: content is lists and cards that
 * wrap (no wide tables), long codes and ids break anywhere, and controls wrap onto the next line.
 */
export const CSS = `
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #ffffff; --muted: #57606a; --line: #d0d7de; --accent: #0b5cad; --warn-bg: #fff4d6; --warn-fg: #6b4b00; --note-bg: #ddf4ff; --note-fg: #0a3069; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9aa4ae; --line: #30363d; --accent: #58a6ff; --warn-bg: #3b2e05; --warn-fg: #f2d48a; --note-bg: #0c2d4f; --note-fg: #cae8ff; } }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; justify-content: space-between; align-items: center; gap: .5rem 1rem; padding: .75rem 1rem; border-bottom: 1px solid var(--line); flex-wrap: wrap; }
header nav { display: flex; gap: .5rem 1rem; align-items: center; flex-wrap: wrap; }
.brand { margin: 0; font-weight: 600; }
/* anywhere: a long word (an app's name may be 200 characters of one) also breaks inside flex rows; break-word where unknown. */
main { max-width: 46rem; margin: 0 auto; padding: 1rem; overflow-wrap: break-word; overflow-wrap: anywhere; }
h1 { font-size: 1.6rem; margin-top: .5rem; line-height: 1.25; }
h2 { font-size: 1.25rem; margin-top: 2rem; border-bottom: 1px solid var(--line); padding-bottom: .25rem; }
a { color: var(--accent); }
label { display: block; font-weight: 600; margin: .75rem 0 .25rem; }
label.check, fieldset label { font-weight: 400; display: flex; gap: .5rem; align-items: baseline; margin: .35rem 0; }
fieldset { border: 1px solid var(--line); border-radius: 6px; margin: 1rem 0; padding: .5rem 1rem 1rem; min-width: 0; }
legend { font-weight: 600; padding: 0 .25rem; }
input[type=text], input[type=password], select { font: inherit; padding: .45rem .6rem; width: 100%; max-width: 22rem; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); }
input[type=checkbox], input[type=radio] { width: 1.1rem; height: 1.1rem; flex: none; }
button { font: inherit; padding: .45rem 1rem; border-radius: 6px; border: 1px solid var(--line); background: var(--bg); color: var(--fg); cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
@media (prefers-color-scheme: dark) { button.primary { color: #0d1117; } }
button:focus-visible, a:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.actions { display: flex; flex-wrap: wrap; align-items: center; gap: .75rem; margin-top: 1.25rem; }
.inline { display: inline; }
.warning { background: var(--warn-bg); color: var(--warn-fg); border-radius: 6px; padding: .6rem .9rem; }
.notice { background: var(--note-bg); color: var(--note-fg); border-radius: 6px; padding: .6rem .9rem; }
.error { border-left: 4px solid #cf222e; padding: .4rem .9rem; }
.muted { color: var(--muted); }
code { font-size: .9em; overflow-wrap: anywhere; }
details { margin: .5rem 0; }
summary { cursor: pointer; color: var(--accent); }
dl { display: grid; grid-template-columns: minmax(0, max-content) minmax(0, 1fr); gap: .25rem .75rem; margin: .5rem 0; }
dt { font-weight: 600; }
dd { margin: 0; min-width: 0; }
/* A phone: each term above its value, so the value has the whole width (beside "Permissions allowed" a scope broke mid-word). */
@media (max-width: 30rem) { dl { grid-template-columns: minmax(0, 1fr); gap: 0; } dd { margin-bottom: .5rem; } }
ul.scopes li { margin: .3rem 0; }
ul.apps, ul.members, ol.history { list-style: none; padding: 0; margin: .5rem 0; }
.app { border: 1px solid var(--line); border-radius: 8px; padding: .75rem 1rem; margin: .75rem 0; }
.app p { margin: .35rem 0; }
.app-head { display: flex; flex-wrap: wrap; gap: .25rem .6rem; align-items: baseline; }
.badge { font-size: .8rem; border: 1px solid var(--line); border-radius: 999px; padding: 0 .5rem; color: var(--fg); }
ul.members li, ol.history li { display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; justify-content: space-between; padding: .6rem 0; border-bottom: 1px solid var(--line); }
form.row { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; }
form.row label { margin: 0; }
form.row select { width: auto; }
.tabs { display: flex; flex-wrap: wrap; gap: .25rem 1.25rem; margin: .5rem 0 1rem; }
.tabs a[aria-current="page"] { font-weight: 700; color: var(--fg); text-decoration: none; border-bottom: 3px solid var(--accent); }
`;
