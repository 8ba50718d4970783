/** Markup as a member reads it: no tags (a name's `<bdi>` isolation shows nothing), the escaped characters decoded. */
const ENTITIES: Record<string, string> = {
  '&#39;': "'",
  '&quot;': '"',
  '&lt;': '<',
  '&gt;': '>',
  '&amp;': '&',
};

export const textOf = (html: string | { value: string }): string =>
  (typeof html === 'string' ? html : html.value)
    .replace(/<[^>]*>/g, '')
    .replace(/&(?:#39|quot|lt|gt|amp);/g, (e) => ENTITIES[e]!);
