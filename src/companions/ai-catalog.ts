import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import { type Companion, json } from './document.js';
import {
  type McpServerKind,
  publisherNamespace,
  SERVER_CARD_MEDIA_TYPE,
  serverCardName,
  serverCardUrl,
} from './server-cards.js';
import { SKILLS_INDEX_PATH } from './skills.js';

export const AI_CATALOG_PATH = '/.well-known/ai-catalog.json';
export const AI_CATALOG_MEDIA_TYPE = 'application/ai-catalog+json';

/** `urn:air:{publisher}:{name}`: the catalog's identifier grammar; the publisher is a namespace, never `host:port`. */
const identifier = (config: Config, name: string) => `urn:air:${publisherNamespace(config)}:${name}`;

/** AI Catalog 1.0: the server cards, the skills index and the OpenAPI description of this deployment. */
export function aiCatalog(config: Config): Companion {
  const card = (kind: McpServerKind, displayName: string, description: string) => ({
    identifier: identifier(config, `${kind}-mcp`),
    displayName,
    type: SERVER_CARD_MEDIA_TYPE,
    url: serverCardUrl(config, kind),
    description,
    tags: ['mcp', 'streamable-http'],
    metadata: { serverName: serverCardName(config, kind) },
  });
  const catalog = {
    specVersion: '1.0',
    host: {
      displayName: 'Svc agent access',
      documentationUrl: `${urls.api(config)}/llms.txt`,
    },
    entries: [
      card('user', 'Svc user MCP server', "Read the signed-in user's profile over MCP with a session token."),
      card('agency', 'Svc agency MCP server', 'Work in one agency for one member, with OAuth 2.1 consent.'),
      {
        identifier: identifier(config, 'skills'),
        displayName: 'Svc agent skills',
        type: 'application/agent-skills+json',
        url: `${urls.api(config)}${SKILLS_INDEX_PATH}`,
        description: 'Step-by-step skills for the jobs an agent does here.',
      },
      {
        identifier: identifier(config, 'rest-api'),
        displayName: 'Svc REST API',
        type: 'application/openapi+json',
        url: `${urls.api(config)}/openapi.json`,
        description: 'OpenAPI 3.1 description of the versioned REST API.',
      },
    ],
  };
  return { path: AI_CATALOG_PATH, contentType: AI_CATALOG_MEDIA_TYPE, body: json(catalog) };
}
