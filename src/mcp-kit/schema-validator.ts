import {
  fromJsonSchema,
  type JsonSchemaType,
  type StandardSchemaWithJSON,
} from '@modelcontextprotocol/server';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/server/validators/ajv';
import { z } from 'zod';

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

/** Tools without arguments: an empty object, nothing else (MCP tools: `inputSchema` MUST be an object schema). */
/** The input schema of a tool without arguments, as JSON Schema. */
export const NO_ARGUMENTS_JSON = { type: 'object', properties: {}, additionalProperties: false } as const;

export const NO_ARGUMENTS = fromJsonSchema<Record<string, never>>(
  { ...NO_ARGUMENTS_JSON, properties: {} },
  sharedJsonSchemaValidator,
);
