import { type ZodType, z } from 'zod';
import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import { UserSchema } from '../domain/resources.js';
import { VERSION_HEADER, type VersionRegistry } from '../versions/registry.js';
import { ErrorBodySchema, HealthSchema } from './schemas.js';

/** A zod schema as an OpenAPI 3.1 (JSON Schema 2020-12) component. */
function component(schema: ZodType): Record<string, unknown> {
  const { $schema: _, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' });
  return json;
}

const json = (ref: string) => ({ 'application/json': { schema: { $ref: `#/components/schemas/${ref}` } } });

/**
 * The OpenAPI 3.1 description of the REST API, generated from the schemas that shape the responses and from the
 * version registry, so documentation and behaviour cannot drift.
 */
export function buildOpenApi(config: Config, versions: VersionRegistry): Record<string, unknown> {
  const responseHeaders = {
    [VERSION_HEADER]: { $ref: '#/components/headers/SvcVersion' },
    'x-request-id': { $ref: '#/components/headers/RequestId' },
  };
  return {
    openapi: '3.1.0',
    info: {
      title: 'Svc agent access REST API',
      version: versions.latest,
      summary: 'Act as one signed-in user: read the profile of the user who owns the token.',
      description:
        "Responses are shaped by the dated version in the `Svc-Version` request header, else the caller's pinned version, else the baseline " +
        `\`${versions.baseline}\`. Errors share one shape; branch on \`error.code\`.`,
    },
    servers: [{ url: urls.api(config) }],
    tags: [
      { name: 'System', description: 'Operational endpoints.' },
      { name: 'Users', description: 'The signed-in user.' },
    ],
    paths: {
      '/health': {
        get: {
          tags: ['System'],
          summary: 'Health probe',
          description: 'Answers 200 while the process is serving.',
          security: [],
          responses: { '200': { description: 'The process is serving.', content: json('HealthResult') } },
        },
      },
      '/me': {
        get: {
          operationId: 'me.get',
          tags: ['Users'],
          summary: 'The user who owns the access token',
          description:
            'Works with session tokens and OAuth access tokens; OAuth tokens need the `user:read` scope.',
          parameters: [{ $ref: '#/components/parameters/SvcVersion' }],
          security: [{ bearerAuth: [] }, { oauth2: ['user:read'] }],
          responses: {
            '200': { description: 'The user.', headers: responseHeaders, content: json('User') },
            default: { description: 'An error.', headers: responseHeaders, content: json('Error') },
          },
        },
      },
    },
    components: {
      schemas: {
        HealthResult: component(HealthSchema),
        User: component(UserSchema),
        Error: component(ErrorBodySchema),
      },
      parameters: {
        SvcVersion: {
          name: VERSION_HEADER,
          in: 'header',
          required: false,
          description:
            'The API version to render the response in. Absent: your pinned version, else the baseline.',
          schema: { type: 'string', enum: [...versions.ids] },
        },
      },
      headers: {
        SvcVersion: {
          description: 'The version the response was rendered in.',
          required: true,
          schema: { type: 'string' },
        },
        RequestId: {
          description: 'Unique id of the request; quote it in support requests.',
          required: true,
          schema: { type: 'string' },
        },
      },
      securitySchemes: {
        bearerAuth: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description: `A session token from POST ${urls.issuer(config)}/api/sessions.`,
        },
        oauth2: {
          type: 'oauth2',
          description: 'OAuth 2.1 access token (RFC 9068) for this resource.',
          flows: {
            authorizationCode: {
              authorizationUrl: `${urls.issuer(config)}/oauth2/auth`,
              tokenUrl: `${urls.issuer(config)}/oauth/token`,
              refreshUrl: `${urls.issuer(config)}/oauth/token`,
              scopes: { 'user:read': 'Read your user profile.' },
            },
          },
        },
      },
    },
  };
}
