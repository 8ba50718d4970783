import { readFileSync } from 'node:fs';

/**
 * The package's name and version: MCP `serverInfo`, the server cards, `svc --version` and the `listening` log lines
 * report them (read once; the same from `src/` and `dist/`).
 */
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
};

export const PACKAGE_IDENTITY = { name: pkg.name, version: pkg.version } as const;
