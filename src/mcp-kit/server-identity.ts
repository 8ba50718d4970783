import { readFileSync } from 'node:fs';

/** The package's name and version, as MCP `serverInfo` reports them (read once; the same from `src/` and `dist/`). */
const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
};

export const PACKAGE_IDENTITY = { name: pkg.name, version: pkg.version } as const;
