import type { IncomingMessage } from 'node:http';

/**
 * The error code an answer carried — REST's `error.code`, OAuth's `error`, JSON-RPC's `error.code` — kept for the
 * request's access-log line (server.ts), so that an operator reading a run of 400s from one client sees which refusal
 * it meets (`invalid_grant`, not `invalid_request`) without the body. Only the code, a bounded set the service
 * defines, never the description: descriptions may quote what the client sent.
 */
const answeredErrors = new WeakMap<IncomingMessage, string | number>();

/** Notes the error code of the answer to `request` (called by each shape's writer). */
export function noteAnsweredError(request: IncomingMessage, code: string | number): void {
  answeredErrors.set(request, code);
}

/** The error code noted for `request`'s answer, if any. */
export function answeredError(request: IncomingMessage): string | number | undefined {
  return answeredErrors.get(request);
}
