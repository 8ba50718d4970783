import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/http/errors.js';
import { startTestServer, type TestServer } from '../helpers/harness.js';

// A parsed JSON document under inspection.
type Doc = Record<string, any>;

let server: TestServer;
let doc: Doc;
beforeAll(async () => {
  server = await startTestServer({ seed: false });
  const res = await fetch(`${server.url.api}/openapi.json`);
  expect(res.headers.get('content-type')).toMatch(/^application\/json/);
  doc = (await res.json()) as Doc;
});
afterAll(() => server.close());

it('passes @redocly/cli lint (recommended-strict, with the exceptions docs/contract.md#rest-api requires)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'openapi-'));
  try {
    const file = join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const { stdout } = await promisify(execFile)(
      join(process.cwd(), 'node_modules/.bin/redocly'),
      ['lint', file, '--config', join(process.cwd(), 'redocly.yaml'), '--format', 'json'],
      { env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
    );
    const report = JSON.parse(stdout) as {
      totals: { errors: number; warnings: number };
      problems: unknown[];
    };
    expect(report.problems).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

it('is OpenAPI 3.1 with the tags, operation and servers of docs/contract.md#rest-api', () => {
  expect(doc['openapi']).toBe('3.1.0');
  expect(doc['servers']).toEqual([{ url: server.url.api }]);
  expect(doc['tags'].map((t: Doc) => t['name'])).toEqual(['System', 'Users']);
  expect(doc['paths']['/health']['get']['tags']).toEqual(['System']);
  expect(doc['paths']['/health']['get']['operationId']).toBeUndefined();
  const me = doc['paths']['/me']['get'];
  expect(me['operationId']).toBe('me.get');
  expect(me['tags']).toEqual(['Users']);
  expect(Object.keys(doc['paths']).sort()).toEqual(['/health', '/me']);
});

it('documents the version header, both response headers, the default error and the security of GET /me', () => {
  const me = doc['paths']['/me']['get'];
  const param = doc['components']['parameters']['SvcVersion'];
  expect(me['parameters']).toEqual([{ $ref: '#/components/parameters/SvcVersion' }]);
  expect(param).toMatchObject({
    name: 'Svc-Version',
    in: 'header',
    required: false,
    schema: { enum: ['2026-09-24.albus'] },
  });
  for (const status of ['200', 'default']) {
    expect(Object.keys(me['responses'][status]['headers']).sort()).toEqual(['Svc-Version', 'x-request-id']);
  }
  expect(me['responses']['default']['content']['application/json']['schema']).toEqual({
    $ref: '#/components/schemas/Error',
  });
  expect(me['security']).toEqual([{ bearerAuth: [] }, { oauth2: ['user:read'] }]);
  expect(doc['components']['securitySchemes']['bearerAuth']).toMatchObject({
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
  });
  const flow = doc['components']['securitySchemes']['oauth2']['flows']['authorizationCode'];
  expect(flow['scopes']).toHaveProperty('user:read');
  expect(flow['tokenUrl']).toBe(`${server.url.auth}/oauth/token`);
});

it('generates the schemas from the zod schemas that shape the responses', () => {
  const s = doc['components']['schemas'];
  expect(s['User']['required'].sort()).toEqual(['id', 'image_url', 'object', 'username']);
  expect(s['User']['properties']['image_url']['type']).toEqual(['string', 'null']);
  expect(s['HealthResult']['properties']['uptime']).toMatchObject({ type: 'integer', minimum: 0 });
  expect(s['Error']['properties']['error']['properties']['code']['enum'].sort()).toEqual(
    Object.keys(ERROR_CATALOGUE).sort(),
  );
  expect(s['Error']['properties']['error']['required'].sort()).toEqual([
    'code',
    'message',
    'request_id',
    'type',
  ]);
});
