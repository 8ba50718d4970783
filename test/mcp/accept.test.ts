import { describe, expect, it } from 'vitest';
import { serverWithMcpTokens } from '../agency-mcp/helpers.js';
import { ENGINE } from '../helpers/harness.js';
import { rawRequest, type RawResponse } from '../helpers/raw-http.js';

/**
 * The Accept of a 2025-era request, read as RFC 9110 §12.5.1 reads it (mcp-kit/accept.ts): a client whose Accept
 * admits the event stream that era answers with is served, whatever it listed; one that refuses it gets 406. Before,
 * the SDK's transport looked for both types' names: the range of every type, `text/event-stream` alone and no Accept
 * got 406, and `text/event-stream;q=0` was served a stream.
 */

const env = serverWithMcpTokens();
/** The tool each host answers on its fast path. */
const TOOL = { mcp: 'get_me', agencyMcp: 'list_clients' };

/** A 2025-11-25 request to `surface` with `accept` (none when undefined). */
function call(
  surface: 'mcp' | 'agencyMcp',
  method: string,
  accept: string | undefined,
): Promise<RawResponse> {
  const params =
    method === 'initialize'
      ? { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } }
      : { name: TOOL[surface], arguments: {} };
  return rawRequest(`${env.server.url[surface]}/mcp`, {
    method: 'POST',
    headers: [
      ['Authorization', `Bearer ${env.token[surface]}`],
      ['Content-Type', 'application/json'],
      ['MCP-Protocol-Version', '2025-11-25'],
      ...(accept === undefined ? [] : ([['Accept', accept]] as [string, string][])),
    ],
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  });
}

/** The answer without what differs between two requests (the request id). */
const comparable = (r: RawResponse) => ({
  status: r.status,
  type: r.header('content-type'),
  body: r.body,
});

describe(`Accept on the 2025-era wire (${ENGINE})`, () => {
  for (const surface of ['mcp', 'agencyMcp'] as const) {
    for (const [label, accept] of [
      ['every type', '*/*'],
      ['text/event-stream alone', 'text/event-stream'],
      ['text/*', 'text/*'],
      ['no Accept', undefined],
    ] as const) {
      it(`${surface}: ${label} is served as the SDK's clients are, initialize and ${TOOL[surface]} alike`, async () => {
        for (const method of ['initialize', 'tools/call']) {
          const sdkClients = await call(surface, method, 'application/json, text/event-stream');
          const answer = await call(surface, method, accept);
          expect(sdkClients.status).toBe(200);
          expect(comparable(answer)).toEqual(comparable(sdkClients));
        }
      });
    }

    for (const accept of [
      'application/json',
      'application/json, text/event-stream;q=0',
      'text/event-stream;q=0, */*',
    ]) {
      it(`${surface}: ${accept} refuses the stream → 406`, async () => {
        for (const method of ['initialize', 'tools/call']) {
          const answer = await call(surface, method, accept);
          expect(answer.status).toBe(406);
          expect(answer.json()).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 } });
        }
      });
    }
  }
});
