import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect } from 'vitest';

type Doc = {
  paths: Record<string, Record<string, { responses: Record<string, ResponseSpec> }>>;
  components: { schemas: Record<string, unknown>; headers: Record<string, { required?: boolean }> };
};
type ResponseSpec = {
  headers?: Record<string, { $ref: string }>;
  content?: Record<string, { schema: { $ref: string } }>;
};

/**
 * Validates live responses against the service's own OpenAPI description (JSON Schema 2020-12 via ajv):
 * the status must be documented (or fall to `default`), the body must match, documented headers must be present.
 */
export class OpenApiChecker {
  private readonly ajv = new Ajv2020({ strict: false, allErrors: true });
  constructor(private readonly doc: Doc) {
    (addFormats as unknown as (a: Ajv2020) => void)(this.ajv);
    this.ajv.addSchema({ $id: 'openapi', components: doc.components });
  }

  static async fetch(apiUrl: string): Promise<OpenApiChecker> {
    return new OpenApiChecker((await (await fetch(`${apiUrl}/openapi.json`)).json()) as Doc);
  }

  /** Asserts that a response of `method path` conforms; returns the parsed body. */
  async check(method: string, path: string, res: Response): Promise<unknown> {
    const op = this.doc.paths[path]?.[method.toLowerCase()];
    expect(op, `${method} ${path} is documented`).toBeDefined();
    const spec = op!.responses[String(res.status)] ?? op!.responses['default'];
    expect(spec, `${method} ${path} documents status ${res.status}`).toBeDefined();
    for (const [name, ref] of Object.entries(spec!.headers ?? {})) {
      const header = this.doc.components.headers[ref.$ref.split('/').pop()!];
      if (header?.required) expect(res.headers.get(name), `header ${name}`).toBeTruthy();
    }
    const body = await res.json();
    const schemaRef = spec!.content?.['application/json']?.schema.$ref;
    expect(schemaRef, 'documented JSON body').toBeDefined();
    const validate = this.ajv.getSchema(`openapi${schemaRef}`)!;
    expect(validate(body), JSON.stringify(validate.errors)).toBe(true);
    return body;
  }
}
