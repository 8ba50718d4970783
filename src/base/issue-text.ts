/**
 * A schema issue's message as a caller reads it after the field's name: zod's "Invalid input: expected string,
 * received number" without the prefix, which says nothing the name before it does not (`cursor: expected string,
 * received number`), and with JSON's word for an object where zod says record. One rendering for every surface that
 * names a bad field: REST, OAuth, the MCP hosts, the configuration.
 */
export function issueText(message: string): string {
  return message.replace(/^Invalid (input|option): /, '').replace(/^expected record\b/, 'expected object');
}

/**
 * What follows the name of a field that was not asked for: the fields that are taken (`unknown field (allowed: limit,
 * cursor)`), or, when there are none, `none` says so. The agency tools and the dashboard API word it alike.
 */
export function unknownFieldText(allowed: readonly string[], none: string): string {
  return allowed.length ? `unknown field (allowed: ${allowed.join(', ')})` : `unknown field (${none})`;
}
