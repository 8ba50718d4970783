import { SCOPES } from '../domain/scopes.js';
import type { Config } from '../config/config.js';
import { urls } from '../context.js';
import { type Companion, json, sha256Digest } from './document.js';
import { resourceOf } from './server-cards.js';

/**
 * Agent skills (SKILL.md with YAML front matter), one per job an agent does here, and their discovery index
 * (Agent Skills Discovery 0.2.0). The index's digests are computed from the exact bytes served.
 */

export const SKILLS_INDEX_PATH = '/.well-known/agent-skills/index.json';
const SKILLS_INDEX_SCHEMA = 'https://schemas.agentskills.io/discovery/0.2.0/schema.json';

interface Skill {
  name: string;
  description: string;
  body: (config: Config) => string;
}

const SKILLS: Skill[] = [
  {
    name: 'read-user-profile',
    description:
      "Read the signed-in user's profile (id, username, avatar) through the REST API or the user MCP server.",
    body: (c) => `# Read the user's profile

1. Get a session token: \`POST ${urls.issuer(c)}/api/sessions\` with JSON \`{"username": "...", "password": "..."}\`.
   The answer is \`{"object": "session", "id", "token", "expires_at"}\`; keep \`token\` secret.
2. Either call the REST API:
   \`GET ${urls.api(c)}/me\` with \`Authorization: Bearer <token>\` (optionally \`Svc-Version: <version>\`), which
   answers \`{"object": "user", "id", "username", "image_url"}\`;
3. or connect an MCP client to \`${urls.mcpResource(c)}\` with the same bearer token and call the tool \`get_me\`
   (or read the resource \`user://me\`).

On \`401\`, read \`error.code\`: \`token_expired\` or \`token_revoked\` mean sign in again; \`invalid_authorization_header\`
means send exactly one \`Authorization: Bearer <token>\`. On \`429\`, wait \`Retry-After\` seconds.
See ${urls.api(c)}/auth.md for every error and ${urls.api(c)}/openapi.json for the schema.
`,
  },
  {
    name: 'work-in-an-agency',
    description: 'Work in one agency for one member through the agency MCP server, after OAuth 2.1 consent.',
    body: (c) => `# Work in an agency

The agency MCP server at \`${resourceOf(c, 'agency')}\` acts for one member of one agency. It accepts only OAuth
access tokens issued by \`${urls.issuer(c)}\` for that resource.

1. Call the server without a token; the \`401\` names the protected-resource metadata in \`WWW-Authenticate\`.
2. Fetch it, then the authorization-server metadata at \`${urls.issuer(c)}/.well-known/oauth-authorization-server\`.
3. Register: use a Client ID Metadata Document (an https \`client_id\` URL), or \`POST ${urls.issuer(c)}/oauth/register\`.
4. Send the member to \`${urls.issuer(c)}/oauth2/auth\` with PKCE (S256), \`resource=${resourceOf(c, 'agency')}\`
   and \`scope=${SCOPES.agencyRead} ${SCOPES.offline}\` (add \`${SCOPES.agencyWrite}\` to change data). They sign in, pick the
   agency and choose what you may do.
5. Exchange the code at \`${urls.issuer(c)}/oauth/token\`; call the server with \`Authorization: Bearer <access token>\`.
6. \`tools/list\` shows only what the member allowed. A write tool answering \`403 insufficient_scope\` means
   authorize once more with both scopes. Refresh tokens rotate on every use: always keep the newest.

Step-by-step details and every error: ${urls.api(c)}/auth.md.
`,
  },
];

export const skillPath = (name: string) => `/.well-known/agent-skills/${name}/SKILL.md`;

function skillDocument(skill: Skill, config: Config): Companion {
  const frontMatter = `---\nname: ${skill.name}\ndescription: ${JSON.stringify(skill.description)}\n---\n\n`;
  return {
    path: skillPath(skill.name),
    contentType: 'text/markdown; charset=utf-8',
    body: frontMatter + skill.body(config),
  };
}

/** Every SKILL.md, and the index that lists them with the digests of those exact bytes. */
export function skillDocuments(config: Config): Companion[] {
  const documents = SKILLS.map((s) => skillDocument(s, config));
  const index = {
    $schema: SKILLS_INDEX_SCHEMA,
    skills: SKILLS.map((s, i) => ({
      name: s.name,
      type: 'skill-md',
      description: s.description,
      url: `${urls.api(config)}${skillPath(s.name)}`,
      digest: sha256Digest(documents[i]!.body),
    })),
  };
  return [
    ...documents,
    { path: SKILLS_INDEX_PATH, contentType: 'application/json; charset=utf-8', body: json(index) },
  ];
}

export const SKILL_NAMES = SKILLS.map((s) => s.name);
export const skillDescriptions = () => SKILLS.map((s) => ({ name: s.name, description: s.description }));
