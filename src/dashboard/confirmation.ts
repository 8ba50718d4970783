import { type Html, markup } from '../web/html.js';

/**
 * The page a member action asks first on (Remove, Disconnect): what ends, in a sentence; the action's own form (the
 * POST the list sent before, with its CSRF token), whose button says what it does; and a link that keeps things as
 * they are.
 */
export function confirmationView(o: {
  consequence: Html;
  action: string;
  csrf: string;
  confirm: Html;
  keep: { href: string; label: Html };
}): Html {
  return markup`<p>${o.consequence}</p>
<form method="post" action="${o.action}" class="actions">
  <input type="hidden" name="csrf" value="${o.csrf}">
  <button type="submit" class="primary">${o.confirm}</button>
  <a href="${o.keep.href}">${o.keep.label}</a>
</form>`;
}
