// The layers of src/, lowest first (docs/architecture.md explains each). A folder may import its own files and the
// folders of a LOWER rank, never one of the same or a higher rank: that keeps the folder graph free of cycles.
// `src/app.ts` (the composition root) and `src/cli/` may import anything. Type-only imports count too.
export const LAYERS = [
  ['base'], // pure primitives: clock, ids, LRU, secrets, the metrics interfaces
  ['config'], // the validated, frozen configuration and the public URLs derived from it
  ['store'], // database, migrations, cached lookups
  ['domain'], // members, agencies, connections, sessions, scopes: rules over the store
  ['tokens'], // JWT signing and verification, liveness
  ['http'], // Fastify server kit: errors, bearer, rate limits, public documents, fast paths, Prometheus metrics
  ['versions'], // API version registry and resolution
  ['web', 'mcp-kit'], // page/form kit for the browser pages; MCP HTTP kit for both MCP servers
  ['context.js'], // AppContext: the bundle the composition root hands every surface
  ['auth'], // OAuth authorization server endpoints and the session API
  ['dashboard'], // member pages: sign-in, Connected apps, Members, Settings, History
  ['dashboard-api'], // first-party dashboard API
  ['api', 'mcp'], // REST API; user MCP server
  ['agency-mcp'], // agency MCP server (reaches agency data through the dashboard API)
  ['companions'], // public documents describing every surface
];

const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
const folderRegex = (names) => `^(\\.\\./)+(${names.map(escape).join('|')})(/|$)`;

function restriction(forbidden, rank) {
  return [
    'error',
    {
      patterns: [
        {
          regex: folderRegex(forbidden),
          message: `Layering: this folder (rank ${rank}) may only import lower layers (eslint.layers.js, docs/architecture.md).`,
        },
      ],
    },
  ];
}

/** One ESLint config block per folder, forbidding imports of its own rank's siblings and every higher rank. */
export function layerRules() {
  const blocks = [];
  LAYERS.forEach((names, rank) => {
    const above = LAYERS.slice(rank + 1).flat();
    for (const name of names) {
      const siblings = names.filter((n) => n !== name);
      const forbidden = [...siblings, ...above];
      if (forbidden.length === 0) continue;
      const files = name.endsWith('.js') ? [`src/${name.replace(/\.js$/, '.ts')}`] : [`src/${name}/**/*.ts`];
      blocks.push({ files, rules: { 'no-restricted-imports': restriction(forbidden, rank) } });
    }
  });
  return blocks;
}
