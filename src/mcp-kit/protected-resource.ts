import type { FastifyInstance } from 'fastify';
import { servePublicDocuments } from '../http/public-documents.js';

/** What an OAuth protected resource publishes about itself (RFC 9728 §2). */
export interface ProtectedResource {
  /** The resource identifier, e.g. `${MCP_URL}/mcp` (RFC 8707 §2, RFC 9728 §2 `resource`). */
  resource: string;
  authorizationServers: readonly string[];
  scopesSupported: readonly string[];
  resourceName: string;
}

const WELL_KNOWN = '/.well-known/oauth-protected-resource';

/**
 * RFC 9728 §3.1: the metadata URL is the resource's origin, then the well-known segment, then the resource's path —
 * `https://h/mcp` → `https://h/.well-known/oauth-protected-resource/mcp`.
 */
export function protectedResourceMetadataUrl(resource: string): string {
  const url = new URL(resource);
  const path = url.pathname === '/' ? '' : url.pathname;
  return `${url.origin}${WELL_KNOWN}${path}`;
}

/** RFC 9728 §2 metadata document. Bearer tokens are taken from the Authorization header only (RFC 6750 §2.1). */
export function protectedResourceMetadata(pr: ProtectedResource): Record<string, unknown> {
  return {
    resource: pr.resource,
    authorization_servers: [...pr.authorizationServers],
    scopes_supported: [...pr.scopesSupported],
    bearer_methods_supported: ['header'],
    resource_name: pr.resourceName,
  };
}

/**
 * Serves the metadata at the path-suffixed location (RFC 9728 §3.1) and at the bare well-known path, which clients
 * of MCP 2025-06-18 probe first. Public, cacheable, no authentication.
 */
export function registerProtectedResourceMetadata(
  app: FastifyInstance,
  resourcePath: string,
  describe: () => ProtectedResource,
): void {
  const document = (path: string) => () => ({
    path,
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify(protectedResourceMetadata(describe())),
  });
  const paths = new Set([WELL_KNOWN, `${WELL_KNOWN}${resourcePath === '/' ? '' : resourcePath}`]);
  servePublicDocuments(app, Object.fromEntries([...paths].map((path) => [path, document(path)])));
}
