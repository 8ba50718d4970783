import { buildOpenApi } from '../api/openapi.js';
import type { AppContext } from '../context.js';
import { AI_CATALOG_PATH, aiCatalog } from './ai-catalog.js';
import { authMd } from './auth-md.js';
import { json } from './document.js';
import { llmsTxt } from './llms-txt.js';
import type { DocumentBuilders } from '../http/public-documents.js';
import { SERVER_CARD_MEDIA_TYPE, serverCard, serverCardName, serverCardUrl } from './server-cards.js';
import { SKILL_NAMES, SKILLS_INDEX_PATH, skillDocuments, skillPath } from './skills.js';

/** The well-known server-card path of SEP-2127, on every host. */
export const WELL_KNOWN_SERVER_CARD = '/.well-known/mcp/server-card.json';

/** Every companion the REST host serves, by path. */
export function restHostCompanions(ctx: AppContext): DocumentBuilders {
  const c = ctx.config;
  const skills = () => new Map(skillDocuments(c).map((d) => [d.path, d]));
  return {
    '/openapi.json': () => ({
      path: '/openapi.json',
      contentType: 'application/json; charset=utf-8',
      body: json(buildOpenApi(c, ctx.versions)),
    }),
    '/llms.txt': () => llmsTxt(c, ctx.versions),
    '/auth.md': () => authMd(ctx),
    [AI_CATALOG_PATH]: () => aiCatalog(c),
    ...Object.fromEntries(
      [SKILLS_INDEX_PATH, ...SKILL_NAMES.map(skillPath)].map((path) => [path, () => skills().get(path)!]),
    ),
    // The REST host runs no MCP server itself: its card location points to the cards of both MCP hosts.
    [WELL_KNOWN_SERVER_CARD]: () => ({
      path: WELL_KNOWN_SERVER_CARD,
      contentType: 'application/json; charset=utf-8',
      body: json({
        serverCards: (['user', 'agency'] as const).map((kind) => ({
          name: serverCardName(c, kind),
          type: SERVER_CARD_MEDIA_TYPE,
          url: serverCardUrl(c, kind),
        })),
      }),
    }),
  };
}

/** An MCP host's own card, at `<mcp-url>/server-card` and at the well-known location. */
export function mcpHostCompanions(ctx: AppContext, kind: 'user' | 'agency'): DocumentBuilders {
  const card = (path: string) => () => ({
    path,
    contentType: SERVER_CARD_MEDIA_TYPE,
    body: json(serverCard(ctx.config, kind)),
  });
  return {
    '/mcp/server-card': card('/mcp/server-card'),
    [WELL_KNOWN_SERVER_CARD]: card(WELL_KNOWN_SERVER_CARD),
  };
}
