import {
  fromJsonSchema,
  type JsonSchemaType,
  type StandardSchemaWithJSON,
} from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import { z } from 'zod';
import { issueText, unknownFieldText } from '../base/issue-text.js';

/**
 * One JSON Schema validator for every MCP server instance in the process. The SDK builds a new Ajv per server when
 * none is given, and servers are built per request: that alone cost about a third of a tools/call (docs/contract.md#mcp-servers).
 */
export const sharedJsonSchemaValidator = new AjvJsonSchemaValidator();

/**
 * A tool schema converted to JSON Schema once, at module scope, and compiled once by the shared validator. The SDK
 * would otherwise convert a zod schema on each new server's first tools/list or tools/call.
 */
export function precompiledSchema<T>(schema: z.ZodType<T>): StandardSchemaWithJSON<T, T> {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' }) as JsonSchemaType;
  delete (json as Record<string, unknown>)['$schema'];
  return fromJsonSchema<T>(json, sharedJsonSchemaValidator);
}

/**
 * A tool's input schema: JSON Schema computed once at module scope for `tools/list`, validated with zod so that an
 * invalid argument is a tool error naming the field, and an argument the tool does not take is named with what it
 * takes (the JSON Schema validator's "data must NOT have additional properties" names neither).
 */
export function toolInputSchema(
  schema: z.ZodObject,
): StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>> {
  const json = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'input' }) as JsonSchemaType;
  delete (json as Record<string, unknown>)['$schema'];
  const unknownField = unknownFieldText(Object.keys(schema.shape), 'this tool takes no arguments');
  return {
    '~standard': {
      version: 1,
      vendor: 'svc',
      jsonSchema: { input: () => json, output: () => json },
      validate: (value: unknown) => {
        const r = schema.safeParse(value);
        if (r.success) return { value: r.data as Record<string, unknown> };
        // One issue per unknown key: the SDK joins an issue's path with dots, so two keys in one read as a nested path.
        return {
          issues: r.error.issues.flatMap((i) =>
            i.code === 'unrecognized_keys'
              ? i.keys.map((key) => ({ message: unknownField, path: [key] }))
              : [{ message: issueText(i.message), path: i.path as PropertyKey[] }],
          ),
        };
      },
    },
  } as StandardSchemaWithJSON<Record<string, unknown>, Record<string, unknown>>;
}

/** The input schema of a tool without arguments (MCP tools: `inputSchema` MUST be an object schema). */
export const NO_ARGUMENTS = toolInputSchema(z.strictObject({}));

/** The same, as JSON Schema: an empty object, nothing else. */
export const NO_ARGUMENTS_JSON = { type: 'object', properties: {}, additionalProperties: false } as const;
