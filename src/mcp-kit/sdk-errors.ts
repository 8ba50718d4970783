import type { FastifyBaseLogger } from 'fastify';

/**
 * The SDK reports every refused request (wrong version, header mismatch, bad envelope) and every failure through one
 * `onerror` callback. Refusals are the client's doing and already answered in the spec's shape: debug. The rest: warn.
 */
export function reportSdkError(log: FastifyBaseLogger, error: Error): void {
  const refusal =
    /^(Rejected|Unsupported|Bad Request|Parse error|Method not allowed|Not Acceptable)/.test(error.message) ||
    'code' in error;
  if (refusal) log.debug({ mcp_error: error.message }, 'MCP request refused');
  else log.warn({ err: error }, 'MCP error');
}
