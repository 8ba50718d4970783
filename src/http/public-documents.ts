import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** A public document served as it is: metadata, discovery documents, the companions for agents. */
export interface PublicDocument {
  /** Path on its host, e.g. `/llms.txt`. */
  path: string;
  contentType: string;
  body: string;
}

interface Served extends PublicDocument {
  etag: string;
}

/** A document's path and how to build it; built on first request, when every public URL is known. */
export type DocumentBuilders = Record<string, () => PublicDocument>;

/**
 * Serves public documents (GET and HEAD, and CORS preflights) with their media type, CORS headers,
 * `Cache-Control`, and a strong `ETag` answered with 304 on a matching `If-None-Match` (RFC 9110 §13.1.2).
 * Each document is built once, on its first request, and then served from memory.
 */
export function servePublicDocuments(app: FastifyInstance, builders: DocumentBuilders): void {
  for (const [path, build] of Object.entries(builders)) {
    let served: Served | undefined;
    app.get(path, (request, reply) => {
      if (!served) {
        const doc = build();
        served = { ...doc, etag: etagOf(doc.body) };
      }
      return send(request, reply, served);
    });
    answerPreflight(app, path);
  }
}

/**
 * Serves a public document whose body changes while the process runs (the JWK Set, as signing keys rotate) as
 * `servePublicDocuments` serves the others: read on each request, its `ETag` that of the body read, so a verifier
 * revalidating after a rotation gets the new set and, until then, a 304.
 */
export function serveChangingDocument(
  app: FastifyInstance,
  path: string,
  contentType: string,
  read: () => Promise<string>,
): void {
  let last: Served | undefined;
  app.get(path, async (request, reply) => {
    const body = await read();
    if (last?.body !== body) last = { path, contentType, body, etag: etagOf(body) };
    return send(request, reply, last);
  });
  answerPreflight(app, path);
}

/**
 * A browser client fetching a document cross-origin with If-None-Match sends a CORS preflight first (Fetch standard
 * §4.8): answer it, or the revalidation never happens.
 */
function answerPreflight(app: FastifyInstance, path: string): void {
  app.options(path, (_request, reply) =>
    reply.code(204).headers(CORS_HEADERS).header('access-control-max-age', '86400').send(),
  );
}

/**
 * Public documents may be read from any origin without credentials: GET and HEAD, the conditional request header a
 * client revalidates with, and `ETag` readable by scripts (Fetch standard: not a CORS-safelisted response header).
 */
const CORS_HEADERS = {
  'access-control-allow-origin': '*',
  'access-control-allow-methods': 'GET, HEAD, OPTIONS',
  'access-control-allow-headers': 'If-None-Match, Accept, MCP-Protocol-Version',
  'access-control-expose-headers': 'ETag',
};

const etagOf = (body: string) => `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;

function send(request: FastifyRequest, reply: FastifyReply, doc: Served): FastifyReply {
  reply
    .headers(CORS_HEADERS)
    .header('cache-control', 'public, max-age=300')
    .header('etag', doc.etag)
    .header('vary', 'Accept-Encoding');
  if (matches(request.headers['if-none-match'], doc.etag)) return reply.code(304).send();
  return reply.type(doc.contentType).send(doc.body);
}

/** RFC 9110 §13.1.2: `*` or any listed tag, compared weakly (a `W/` prefix does not matter for If-None-Match). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}
