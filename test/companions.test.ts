import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { seedDemo } from '../src/domain/demo-seed.js';
import { grant } from './agency-mcp/helpers.js';
import { signIn, startTestServer, type TestServer } from './helpers/harness.js';
import { jsonRpcOf, modernRequest } from './helpers/mcp.js';

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const schema = (name: string) =>
  ajv.compile(JSON.parse(readFileSync(new URL(`./fixtures/${name}.schema.json`, import.meta.url), 'utf8')));
/** The published Server Card schema keeps its definitions under `$defs`; a card is a `ServerCard` (test/fixtures/README.md). */
ajv.addSchema(
  JSON.parse(readFileSync(new URL('./fixtures/server-card.schema.json', import.meta.url), 'utf8')),
  'mcp-server-card',
);
const validators = {
  card: ajv.compile({ $ref: 'mcp-server-card#/$defs/ServerCard' }),
  catalog: schema('ai-catalog'),
  skills: schema('agent-skills-index'),
};

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer({ seed: false });
});
afterAll(() => server.close());

const get = (url: string, headers: Record<string, string> = {}) => fetch(url, { headers });
const expectValid = (validate: (typeof validators)['card'], doc: unknown) =>
  expect(validate(doc), JSON.stringify(validate.errors)).toBe(true);

const REST_DOCS: [string, RegExp][] = [
  ['/openapi.json', /^application\/json/],
  ['/llms.txt', /^text\/plain; charset=utf-8/],
  ['/auth.md', /^text\/markdown; charset=utf-8/],
  ['/.well-known/ai-catalog.json', /^application\/ai-catalog\+json/],
  ['/.well-known/agent-skills/index.json', /^application\/json/],
  ['/.well-known/agent-skills/read-user-profile/SKILL.md', /^text\/markdown/],
  ['/.well-known/agent-skills/work-in-an-agency/SKILL.md', /^text\/markdown/],
  ['/.well-known/mcp/server-card.json', /^application\/json/],
];

describe('HTTP behaviour of the companions', () => {
  it.each(REST_DOCS)('%s: 200, media type, CORS, caching, ETag', async (path, type) => {
    const res = await get(`${server.url.api}${path}`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(type);
    expect(res.headers.get('access-control-allow-origin')).toBe('*');
    expect(res.headers.get('cache-control')).toMatch(/public, max-age=\d+/);
    const etag = res.headers.get('etag')!;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const again = await get(`${server.url.api}${path}`, { 'if-none-match': etag });
    expect(again.status).toBe(304);
    expect(await again.text()).toBe('');
    expect((await get(`${server.url.api}${path}`, { 'if-none-match': `"other", W/${etag}` })).status).toBe(
      304,
    );
    expect((await get(`${server.url.api}${path}`, { 'if-none-match': '"stale"' })).status).toBe(200);
    const head = await fetch(`${server.url.api}${path}`, { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect(head.headers.get('etag')).toBe(etag);
    expect(await head.text()).toBe('');
  });

  it('OAuth metadata documents are served the same way: CORS, caching, ETag and 304', async () => {
    for (const url of [
      `${server.url.auth}/.well-known/oauth-authorization-server`,
      `${server.url.mcp}/.well-known/oauth-protected-resource/mcp`,
      `${server.url.mcp}/.well-known/oauth-protected-resource`,
      `${server.url.agencyMcp}/.well-known/oauth-protected-resource/mcp`,
    ]) {
      const res = await get(url);
      expect(res.status, url).toBe(200);
      expect(res.headers.get('content-type')).toMatch(/^application\/json/);
      expect(res.headers.get('access-control-allow-origin')).toBe('*');
      expect(res.headers.get('cache-control')).toMatch(/public, max-age=\d+/);
      expect((await get(url, { 'if-none-match': res.headers.get('etag')! })).status, url).toBe(304);
    }
  });

  it('points every REST host response at the AI catalog with a Link header', async () => {
    for (const path of ['/health', '/me', '/nope', '/llms.txt']) {
      expect((await get(`${server.url.api}${path}`)).headers.get('link')).toBe(
        '</.well-known/ai-catalog.json>; rel="ai-catalog"',
      );
    }
  });

  it.each(['mcp', 'agencyMcp'] as const)(
    'serves the %s server card on its own host, at both locations',
    async (host) => {
      const base = server.url[host];
      for (const url of [`${base}/mcp/server-card`, `${base}/.well-known/mcp/server-card.json`]) {
        const res = await get(url);
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toMatch(/^application\/mcp-server-card\+json/);
        expect(res.headers.get('access-control-allow-origin')).toBe('*');
        const card = (await res.json()) as Record<string, any>;
        expectValid(validators.card, card);
        expect(card['remotes'][0]).toMatchObject({ type: 'streamable-http', url: `${base}/mcp` });
        expect(card['version']).toBe(host === 'mcp' ? '0.1.0' : '1.0.0');
        expect(card['remotes'][0]['supportedProtocolVersions']).toEqual([
          '2026-07-28',
          '2025-11-25',
          '2025-06-18',
        ]);
      }
    },
  );
});

describe('discovery documents where clients read them', () => {
  // The cards are compared with live answers, which need a signed-in user and a grant.
  beforeAll(() => seedDemo(server.services.ctx.db, server.clock, false));
  const documents = () => [
    ...REST_DOCS.map(([path]) => `${server.url.api}${path}`),
    `${server.url.mcp}/mcp/server-card`,
    `${server.url.agencyMcp}/.well-known/mcp/server-card.json`,
  ];

  it('a CORS preflight is answered for every public document, and ETag is readable by scripts', async () => {
    for (const url of documents()) {
      const preflight = await fetch(url, {
        method: 'OPTIONS',
        headers: {
          origin: 'https://client.example',
          'access-control-request-method': 'GET',
          'access-control-request-headers': 'if-none-match',
        },
      });
      expect(preflight.status, url).toBe(204);
      expect(preflight.headers.get('access-control-allow-origin')).toBe('*');
      expect(preflight.headers.get('access-control-allow-methods')).toContain('GET');
      expect(preflight.headers.get('access-control-allow-headers')?.toLowerCase()).toContain('if-none-match');
      const res = await get(url, { origin: 'https://client.example' });
      expect(res.headers.get('access-control-expose-headers')?.toLowerCase()).toContain('etag');
      const etag = res.headers.get('etag')!;
      expect((await get(url, { 'if-none-match': etag })).status).toBe(304);
    }
  });

  it.each(['mcp', 'agencyMcp'] as const)(
    'the %s card agrees with what the server reports (serverInfo, server/discover)',
    async (host) => {
      const token =
        host === 'mcp'
          ? (await signIn(server)).token
          : (await grant(server, { scopes: ['agency:mcp:read'] })).token;
      const card = (await (await get(`${server.url[host]}/mcp/server-card`)).json()) as Record<string, any>;
      const discover = (await jsonRpcOf(
        await modernRequest(`${server.url[host]}/mcp`, 'server/discover', {}, { token }),
      )) as { result: { supportedVersions: string[]; _meta: Record<string, any> } };
      const info = discover.result._meta['io.modelcontextprotocol/serverInfo'];
      expect(card['title']).toBe(info.title);
      expect(card['version']).toBe(info.version);
      // server/discover names the revisions that speak it; the card names every revision the endpoint serves
      // (the 2025 ones are negotiated by initialize instead).
      for (const v of discover.result.supportedVersions) {
        expect(card['remotes'][0]['supportedProtocolVersions']).toContain(v);
      }
    },
  );

  it('AI catalog identifiers carry a namespace, never the host:port of the server', async () => {
    const catalog = (await (await get(`${server.url.api}/.well-known/ai-catalog.json`)).json()) as Record<
      string,
      any
    >;
    const identifiers = JSON.stringify(catalog).match(/urn:air:[^"]+/g) ?? [];
    expect(identifiers.length).toBeGreaterThan(0);
    for (const id of identifiers) {
      expect(id).toMatch(/^urn:air:[a-z0-9.-]+:[a-z0-9-]+$/);
      expect(id).not.toContain(new URL(server.url.api).port);
    }
  });
});

describe('links', () => {
  it('every URL inside every document answers', async () => {
    const documents = [
      ...REST_DOCS.map(([path]) => `${server.url.api}${path}`),
      `${server.url.mcp}/mcp/server-card`,
      `${server.url.agencyMcp}/mcp/server-card`,
    ];
    const hosts = Object.values(server.url);
    const urls = new Set<string>();
    for (const doc of documents) {
      const text = await (await get(doc)).text();
      for (const [url] of text.matchAll(/https?:\/\/[^\s"'`)<>\]]+/g)) {
        if (hosts.some((h) => url.startsWith(h))) urls.add(url.replace(/[.,;:]+$/, ''));
      }
    }
    expect(urls.size).toBeGreaterThan(10);
    for (const url of urls) {
      // A bare origin is an identifier (the issuer, a host), not a document: it must be one of the configured hosts.
      if (new URL(url).pathname === '/' && !url.endsWith('/')) {
        expect(hosts, url).toContain(url);
        continue;
      }
      const res = await get(url);
      // Protocol endpoints (MCP, OAuth, the session API, GET /me) are not public documents: they exist and answer per their protocol.
      if (/\/mcp$|\/me$|\/oauth2?\/|\/api\/sessions/.test(url))
        expect([200, 400, 401, 405], url).toContain(res.status);
      else expect(res.status, url).toBe(200);
    }
  });

  it('server cards publish the tools and resources the servers run', async () => {
    const { AGENCY_TOOLS } = await import('../src/agency-mcp/tools.js');
    const agency = (await (await get(`${server.url.agencyMcp}/mcp/server-card`)).json()) as {
      tools: { name: string }[];
    };
    expect(agency.tools.map((t) => t.name)).toEqual(AGENCY_TOOLS.map((t) => t.name));
    const user = (await (await get(`${server.url.mcp}/mcp/server-card`)).json()) as {
      tools: { name: string }[];
      resources: { uri: string }[];
    };
    expect(user.tools.map((t) => t.name)).toEqual(['get_me']);
    expect(user.resources.map((r) => r.uri)).toEqual(['user://me']);
  });
});

describe('formats', () => {
  it('llms.txt: H1, blockquote summary, H2 sections of links', async () => {
    const text = await (await get(`${server.url.api}/llms.txt`)).text();
    const lines = text.split('\n');
    expect(lines[0]).toMatch(/^# \S/);
    expect(lines.find((l) => l.trim() !== '' && !l.startsWith('# '))).toMatch(/^> /);
    const sections = lines.filter((l) => l.startsWith('## ')).map((l) => l.slice(3));
    expect(sections).toEqual(['API', 'MCP servers', 'Skills', 'Optional']);
    for (const l of lines.filter((l) => l.startsWith('- ')))
      expect(l).toMatch(/^- \[[^\]]+\]\(https?:\/\/[^)]+\)(: .+)?$/);
    for (const needle of [
      '/openapi.json',
      '/auth.md',
      '/mcp/server-card',
      '/.well-known/agent-skills/index.json',
    ])
      expect(text).toContain(needle);
  });

  it('ai-catalog.json: AI Catalog 1.0 listing the server cards, the skills index and the OpenAPI description', async () => {
    const catalog = (await (await get(`${server.url.api}/.well-known/ai-catalog.json`)).json()) as {
      entries: { type: string; url: string }[];
    };
    expectValid(validators.catalog, catalog);
    expect(catalog.entries.map((e) => e.type).sort()).toEqual(
      [
        'application/agent-skills+json',
        'application/mcp-server-card+json',
        'application/mcp-server-card+json',
        'application/openapi+json',
      ].sort(),
    );
  });

  it('agent skills: the index validates and every digest is the sha256 of the bytes served', async () => {
    const index = (await (await get(`${server.url.api}/.well-known/agent-skills/index.json`)).json()) as {
      skills: { name: string; url: string; digest: string; description: string }[];
    };
    expectValid(validators.skills, index);
    expect(index.skills.map((s) => s.name)).toEqual(['read-user-profile', 'work-in-an-agency']);
    for (const skill of index.skills) {
      const bytes = Buffer.from(await (await get(skill.url)).arrayBuffer());
      expect(`sha256:${createHash('sha256').update(bytes).digest('hex')}`).toBe(skill.digest);
      const text = bytes.toString('utf8');
      const front = /^---\nname: (.+)\ndescription: (.+)\n---\n/.exec(text);
      expect(front, 'YAML front matter').not.toBeNull();
      expect(front![1]).toBe(skill.name);
      expect(JSON.parse(front![2]!)).toBe(skill.description);
    }
  });

  it("the REST host's server-card.json points to both MCP servers' cards", async () => {
    const doc = (await (await get(`${server.url.api}/.well-known/mcp/server-card.json`)).json()) as {
      serverCards: { url: string }[];
    };
    expect(doc.serverCards.map((c) => c.url)).toEqual([
      `${server.url.mcp}/mcp/server-card`,
      `${server.url.agencyMcp}/mcp/server-card`,
    ]);
  });

  it('auth.md carries the live OAuth metadata URLs and scopes', async () => {
    const text = await (await get(`${server.url.api}/auth.md`)).text();
    const meta = (await (
      await get(`${server.url.auth}/.well-known/oauth-authorization-server`)
    ).json()) as Record<string, string>;
    for (const field of [
      'issuer',
      'authorization_endpoint',
      'token_endpoint',
      'registration_endpoint',
      'revocation_endpoint',
      'jwks_uri',
    ]) {
      expect(text, field).toContain(meta[field]);
    }
    expect(text).toContain(`${server.url.agencyMcp}/.well-known/oauth-protected-resource/mcp`);
    for (const scope of ['agency:mcp:read', 'agency:mcp:write', 'offline_access'])
      expect(text).toContain(scope);
    expect(text).toContain(`${server.url.auth}/api/sessions`);
  });
});
