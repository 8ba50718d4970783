import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';

// The project's own lint configuration, applied to source text placed at a path inside src/.
const eslint = new ESLint({ cwd: process.cwd() });

async function layeringErrors(filePath: string, code: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath });
  return result!.messages.filter((m) => m.ruleId === 'no-restricted-imports').map((m) => m.message);
}

describe('layering lint rule', () => {
  it('refuses a core module importing the application context, type-only imports included', async () => {
    const errors = await layeringErrors(
      'src/tokens/example.ts',
      "import type { AppContext } from '../context.js';\nexport type X = AppContext;\n",
    );
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/Layering/);
  });

  it('refuses a lower layer importing a surface, from a nested folder too', async () => {
    const errors = await layeringErrors(
      'src/auth/clients/example.ts',
      "import { dashboardRoutes } from '../../dashboard/dashboard.js';\nexport const x = dashboardRoutes;\n",
    );
    expect(errors).toHaveLength(1);
  });

  it('refuses imports between two folders of the same layer', async () => {
    const errors = await layeringErrors(
      'src/mcp/example.ts',
      "import { apiSurface } from '../api/plugin.js';\nexport const x = apiSurface;\n",
    );
    expect(errors).toHaveLength(1);
  });

  it('lets a surface import the layers below it and its own folder', async () => {
    const errors = await layeringErrors(
      'src/dashboard/example.ts',
      [
        "import { SCOPES } from '../domain/scopes.js';",
        "import { layout } from '../web/html.js';",
        "import type { AppContext } from '../context.js';",
        "import { signInRoutes } from './sign-in.js';",
        'export const x = [SCOPES, layout, signInRoutes];',
        'export type Y = AppContext;',
        '',
      ].join('\n'),
    );
    expect(errors).toEqual([]);
  });

  it('lets the composition root import every folder', async () => {
    const errors = await layeringErrors(
      'src/app.ts',
      "import { AI_CATALOG_PATH } from './companions/ai-catalog.js';\nexport const x = AI_CATALOG_PATH;\n",
    );
    expect(errors).toEqual([]);
  });
});

describe('the client-counting lint rule', () => {
  const restricted = async (code: string) => {
    const [result] = await eslint.lintText(code, { filePath: 'src/auth/example.ts' });
    return result!.messages.filter((m) => m.ruleId === 'no-restricted-syntax').map((m) => m.message);
  };

  it('refuses a surface keying a limit on request.ip or request.ips', async () => {
    const errors = await restricted(
      "import type { FastifyRequest } from 'fastify';\nexport const key = (request: FastifyRequest) => [request.ip, request.ips];\n",
    );
    expect(errors).toEqual([
      'Count the client with clientNetwork(request) from http/server.ts.',
      'Count the client with clientNetwork(request) from http/server.ts.',
    ]);
  });

  it('lets it count with clientNetwork', async () => {
    const errors = await restricted(
      "import type { FastifyRequest } from 'fastify';\nimport { clientNetwork } from '../http/server.js';\nexport const key = (request: FastifyRequest) => clientNetwork(request);\n",
    );
    expect(errors).toEqual([]);
  });
});
