import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import type { VersionRegistry } from '../versions/registry.js';
import { AI_CATALOG_PATH } from './ai-catalog.js';
import type { Companion } from './document.js';
import { serverCardUrl } from './server-cards.js';
import { SKILLS_INDEX_PATH, skillDescriptions, skillPath } from './skills.js';

/** `/llms.txt` (llmstxt.org): an H1, a blockquote summary, notes, then H2 sections of links. */
export function llmsTxt(config: Config, versions: VersionRegistry): Companion {
  const api = urls.api(config);
  const skills = skillDescriptions().map(
    (s) => `- [${s.name}](${api}${skillPath(s.name)}): ${s.description}`,
  );
  const body = `# Svc agent access

> Lets an AI agent act as one signed-in user: a versioned REST API (\`GET /me\`), a user MCP server, and an agency
> MCP server protected by OAuth 2.1.

Every call sees only the data of the user (or the agency member) who owns the token. The REST API picks its
response shape from the \`Svc-Version\` header (supported: ${versions.ids.join(', ')}; baseline ${versions.baseline}).
Errors share one shape; branch on \`error.code\`.

## API

- [OpenAPI description](${api}/openapi.json): the REST API, its version header, errors and security.
- [Authentication guide](${api}/auth.md): how to get and use tokens for each surface, and what every error means.

## MCP servers

- [User MCP server card](${serverCardUrl(config, 'user')}): Streamable HTTP at ${urls.mcpResource(config)}, session token.
- [Agency MCP server card](${serverCardUrl(config, 'agency')}): Streamable HTTP at ${urls.agencyMcpResource(config)}, OAuth 2.1.

## Skills

- [Skills index](${api}${SKILLS_INDEX_PATH}): every skill with the digest of its SKILL.md.
${skills.join('\n')}

## Optional

- [AI catalog](${api}${AI_CATALOG_PATH}): the server cards, skills and OpenAPI description in one list.
`;
  return { path: '/llms.txt', contentType: 'text/plain; charset=utf-8', body };
}
