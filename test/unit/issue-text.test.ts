import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { issueText } from '../../src/base/issue-text.js';

/** What follows a bad field's name on every surface, from zod's own messages (base/issue-text.ts). */
const textOf = (schema: z.ZodType, value: unknown) =>
  issueText(schema.safeParse(value).error!.issues[0]!.message);

describe('issueText', () => {
  it.each([
    ['a wrong type', z.string(), 5, 'expected string, received number'],
    [
      'an object where a record is taken',
      z.record(z.string(), z.string()),
      5,
      'expected object, received number',
    ],
    ['a fraction where an integer is taken', z.number().int(), 1.5, 'expected an integer, received number'],
    ['an empty string', z.string().min(1), '', 'must not be empty'],
    ['a string too short', z.string().min(3), 'ab', 'must have at least 3 characters'],
    ['a string too long', z.string().max(200), 'x'.repeat(201), 'must have at most 200 characters'],
    ['a number too small', z.number().min(1), 0, 'must be at least 1'],
    ['a number too large', z.number().max(100), 500, 'must be at most 100'],
    ['a number not positive', z.number().positive(), 0, 'must be more than 0'],
    ['a number not negative', z.number().negative(), 0, 'must be less than 0'],
    ['too many items', z.array(z.string()).max(2), ['a', 'b', 'c'], 'must have at most 2 items'],
    ['a value not among the options', z.enum(['a', 'b']), 'c', 'expected one of "a"|"b"'],
    ['a message the schema wrote', z.string().regex(/^x/, 'must start with x'), 'y', 'must start with x'],
  ])('%s', (_, schema, value, text) => {
    expect(textOf(schema, value)).toBe(text);
  });
});
