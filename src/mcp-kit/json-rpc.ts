/**
 * JSON-RPC 2.0 error envelopes for HTTP answers an MCP host writes itself, before or around the SDK (JSON-RPC 2.0 §5.1).
 * The SDK uses the same envelope (`id: null`, code -32000) for its own transport-level refusals, so a client sees one
 * shape whichever layer answered.
 */

export const JSON_RPC_ERRORS = {
  /** JSON-RPC 2.0 §5.1: invalid JSON was received. */
  parseError: -32700,
  invalidRequest: -32600,
  methodNotFound: -32601,
  internalError: -32603,
  /** Implementation-defined server error (JSON-RPC 2.0 §5.1 reserves -32000..-32099); the SDK's transport errors. */
  serverError: -32000,
} as const;

export interface JsonRpcErrorBody {
  jsonrpc: '2.0';
  error: { code: number; message: string; data?: Record<string, unknown> };
  id: null;
}

/** An error envelope naming the request id of this HTTP exchange, so an operator can find it in the log. */
export function jsonRpcErrorBody(code: number, message: string, requestId: string): JsonRpcErrorBody {
  return { jsonrpc: '2.0', error: { code, message, data: { request_id: requestId } }, id: null };
}
