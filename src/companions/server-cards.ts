import { type ZodType, z } from 'zod';
import { AGENCY_TOOLS } from '../agency-mcp/tools.js';
import { SCOPES } from '../domain/scopes.js';
import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import { UserSchema } from '../domain/resources.js';
import { protectedResourceMetadataUrl } from '../mcp-kit/protected-resource.js';
import { MCP_PROTOCOL_VERSIONS } from '../mcp-kit/protocol-versions.js';
import { NO_ARGUMENTS_JSON } from '../mcp-kit/schema-validator.js';
import { PACKAGE_IDENTITY } from '../base/package-identity.js';
import { ME_RESOURCE, ME_URI } from '../mcp/user-resources.js';
import { GET_ME } from '../mcp/user-tools.js';

/**
 * MCP Server Cards (SEP-2127 draft): what a client needs to connect to each MCP server before connecting to it.
 * Built from the same constants the servers run with (URLs, protocol versions, package version, scopes).
 */

export const SERVER_CARD_SCHEMA = 'https://static.modelcontextprotocol.io/schemas/v1/server-card.schema.json';
export const SERVER_CARD_MEDIA_TYPE = 'application/mcp-server-card+json';
/** docs/contract.md#versioning: the agency MCP server is at its own version. */
export const AGENCY_MCP_VERSION = '1.0.0';

export type McpServerKind = 'user' | 'agency';

/** Where a card is served: `<mcp-url>/server-card` on its own host. */
export const serverCardUrl = (config: Config, kind: McpServerKind) =>
  `${resourceOf(config, kind)}/server-card`;

export function resourceOf(config: Config, kind: McpServerKind): string {
  return kind === 'user' ? urls.mcpResource(config) : urls.agencyMcpResource(config);
}

/**
 * The publisher namespace of the documents for agents: the public REST host's DNS labels reversed (SEP-2127's
 * reverse-DNS form), or `localhost.svc` for a bare address; never a port.
 */
export function publisherNamespace(config: Config): string {
  const host = new URL(urls.api(config)).hostname;
  const isDnsName = /[a-z]/i.test(host) && host.includes('.') && !host.includes(':');
  return isDnsName ? host.split('.').reverse().join('.') : 'localhost.svc';
}

/** `name` in reverse-DNS form with one slash (SEP-2127): the publisher namespace, then the server. */
export function serverCardName(config: Config, kind: McpServerKind): string {
  return `${publisherNamespace(config)}/${kind}-mcp`;
}

export function serverCard(config: Config, kind: McpServerKind): Record<string, unknown> {
  const resource = resourceOf(config, kind);
  const user = kind === 'user';
  return {
    $schema: SERVER_CARD_SCHEMA,
    name: serverCardName(config, kind),
    version: user ? PACKAGE_IDENTITY.version : AGENCY_MCP_VERSION,
    // The titles and versions of `serverInfo`; descriptions fit the published schema's 100 characters.
    title: user ? 'Svc user MCP server' : 'Svc agency MCP server',
    description: user
      ? 'Acts as the user who owns the bearer token: reads their profile (get_me, user://me).'
      : 'Acts for one agency member (OAuth 2.1): reads and, with consent, changes clients, projects, tasks.',
    websiteUrl: `${urls.api(config)}/llms.txt`,
    remotes: [
      {
        type: 'streamable-http',
        url: resource,
        supportedProtocolVersions: [...MCP_PROTOCOL_VERSIONS],
        authentication: { required: true, schemes: user ? ['bearer'] : ['oauth2'] },
      },
    ],
    capabilities: user ? { tools: {}, resources: {} } : { tools: {} },
    ...(user ? userPrimitives() : agencyPrimitives()),
    _meta: {
      'io.modelcontextprotocol/oauth-protected-resource': protectedResourceMetadataUrl(resource),
      'svc/auth-guide': `${urls.api(config)}/auth.md`,
    },
  };
}

/** A zod schema as the JSON Schema `tools/list` shows. */
function jsonSchema(schema: ZodType): Record<string, unknown> {
  const { $schema: _, ...json } = z.toJSONSchema(schema, { target: 'draft-2020-12', io: 'output' });
  return json;
}

/** The user server's tool and resource, from the definitions it registers. */
function userPrimitives() {
  return {
    tools: [
      {
        name: 'get_me',
        title: GET_ME.title,
        description: GET_ME.description,
        inputSchema: NO_ARGUMENTS_JSON,
        outputSchema: jsonSchema(UserSchema),
        annotations: GET_ME.annotations,
      },
    ],
    resources: [
      {
        uri: ME_URI,
        name: 'me',
        title: ME_RESOURCE.title,
        description: ME_RESOURCE.description,
        mimeType: ME_RESOURCE.mimeType,
      },
    ],
  };
}

/** Every agency tool; a caller's `tools/list` shows the ones their grant and role allow (docs/contract.md#connections). */
function agencyPrimitives() {
  return {
    tools: AGENCY_TOOLS.map((t) => ({
      name: t.name,
      title: t.title,
      description: t.description,
      inputSchema: jsonSchema(t.inputSchema),
      outputSchema: jsonSchema(t.outputSchema),
      annotations: t.annotations,
      _meta: {
        'svc/permission': t.permission,
        'svc/scope': t.write ? SCOPES.agencyWrite : SCOPES.agencyRead,
      },
    })),
  };
}
