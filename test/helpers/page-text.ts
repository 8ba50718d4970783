/** The characters `esc` (src/web/html.ts) escapes, as written in a page. */
const ENTITIES: Record<string, string> = {
  '&#39;': "'",
  '&quot;': '"',
  '&lt;': '<',
  '&gt;': '>',
  '&amp;': '&',
};

/** Escaped text read back: `&lt;b&gt;` is `<b>`. */
export const unescapeHtml = (text: string): string =>
  text.replace(/&(?:#39|quot|lt|gt|amp);/g, (e) => ENTITIES[e]!);

/** Markup as a member reads it: no tags (a name's `<bdi>` isolation shows nothing), the escaped characters decoded. */
export const textOf = (html: string | { value: string }): string =>
  unescapeHtml((typeof html === 'string' ? html : html.value).replace(/<[^>]*>/g, ''));
