import { type Config, type Surface, urlOf } from './config.js';

/** Public URLs of the surfaces and of the resources they protect (RFC 8707 resource indicators). */
export const urls = {
  issuer: (c: Config) => urlOf(c, 'auth'),
  api: (c: Config) => urlOf(c, 'api'),
  mcpResource: (c: Config) => `${urlOf(c, 'mcp')}/mcp`,
  agencyMcpResource: (c: Config) => `${urlOf(c, 'agency-mcp')}/mcp`,
  of: (c: Config, s: Surface) => urlOf(c, s),
};
