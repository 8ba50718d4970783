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
 *
 * Behind a proxy that mounts the host under a path and strips it (`https://example.com/agency` → `/`), the resource is
 * `https://example.com/agency/mcp` and §3.1 puts its metadata at `/.well-known/oauth-protected-resource/agency/mcp`,
 * outside the mount: the proxy forwards that path as it is, and it is served here too (`mountedAt`, the public URL's
 * path). Before, only `…/mcp` was, and a client that followed the challenge's `resource_metadata` got 404.
 */
export function registerProtectedResourceMetadata(
  app: FastifyInstance,
  resourcePath: string,
  mountedAt: string,
  describe: () => ProtectedResource,
): void {
  const document = (path: string) => () => ({
    path,
    contentType: 'application/json; charset=utf-8',
    body: JSON.stringify(protectedResourceMetadata(describe())),
  });
  const suffix = resourcePath === '/' ? '' : resourcePath;
  const paths = new Set([WELL_KNOWN, `${WELL_KNOWN}${suffix}`, `${WELL_KNOWN}${mountedAt}${suffix}`]);
  servePublicDocuments(app, Object.fromEntries([...paths].map((path) => [path, document(path)])));
}
