/**
 * A schema issue's message as a caller reads it after the field's name: zod's "Invalid input: expected string,
 * received number" without the prefix, which says nothing the name before it does not (`cursor: expected string,
 * received number`), with JSON's word for an object where zod says record and "an integer" where it says int, and a
 * bound in words (`limit: must be at most 100`, `name: must not be empty`) where zod writes `Too big: expected number
 * to be <=100`. One rendering for every surface that names a bad field: REST, OAuth, the MCP hosts, the configuration.
 * A message a schema wrote itself passes as it is.
 */
export function issueText(message: string): string {
  const bound = BOUND.exec(message);
  if (bound) return boundText(bound);
  return message
    .replace(/^Invalid (input|option): /, '')
    .replace(/^expected record\b/, 'expected object')
    .replace(/^expected int\b/, 'expected an integer');
}

/** zod's words for a size or value out of bounds: `Too small: expected string to have >=1 characters`. */
const BOUND = /^Too (?:small|big): expected \w+ to (have|be) ([<>]=?)(\S+)(?: (\w+))?$/;

const COMPARISONS: Record<string, string> = {
  '>=': 'at least',
  '<=': 'at most',
  '>': 'more than',
  '<': 'less than',
};

function boundText([, verb, comparison, limit, unit]: RegExpExecArray): string {
  if (verb === 'have' && comparison === '>=' && limit === '1') return 'must not be empty';
  return `must ${verb} ${COMPARISONS[comparison!]} ${limit}${unit ? ` ${unit}` : ''}`;
}

/**
 * What follows the name of a field that was not asked for: the fields that are taken (`unknown field (allowed: limit,
 * cursor)`), or, when there are none, `none` says so. The agency tools and the dashboard API word it alike.
 */
export function unknownFieldText(allowed: readonly string[], none: string): string {
  return allowed.length ? `unknown field (allowed: ${allowed.join(', ')})` : `unknown field (${none})`;
}
