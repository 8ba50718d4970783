import { describe, expect, it } from 'vitest';
import { toolResultAnswer } from '../../src/mcp-kit/fast-path.js';

const SERVER = { name: 'svc-test', version: '1.0.0' };
const IDENTITY = { 'io.modelcontextprotocol/serverInfo': SERVER };

/** The modern answer as the SDK shapes it: the result's members, then `resultType`, then the server's `_meta`. */
const expected = (id: string | number, result: Record<string, unknown>) =>
  JSON.stringify({ result: { ...result, resultType: 'complete', _meta: IDENTITY }, jsonrpc: '2.0', id });

describe('toolResultAnswer on the 2026-07-28 wire', () => {
  it.each([
    [
      'a tool result',
      7,
      { content: [{ type: 'text', text: 'a "quoted" }, text' }], structuredContent: { a: 1 } },
    ],
    ['an error result with a string id', 'req-1', { content: [], isError: true }],
    ['an empty result', 0, {}],
  ])('writes %s as the SDK does', (_label, id, result) => {
    const answer = toolResultAnswer({ wire: 'modern', id }, result, SERVER);
    expect(answer.body).toBe(expected(id, result));
    expect(answer.headers).toEqual({ 'content-type': 'application/json' });
    // The second answer of a server uses its remembered identity.
    expect(toolResultAnswer({ wire: 'modern', id }, result, SERVER).body).toBe(answer.body);
  });

  it("keeps a result's own _meta where it stands and adds the identity to it", () => {
    const result = { _meta: { trace: 'x' }, content: [] };
    const body = JSON.parse(toolResultAnswer({ wire: 'modern', id: 1 }, result, SERVER).body) as {
      result: Record<string, unknown>;
    };
    expect(Object.keys(body.result)).toEqual(['_meta', 'content', 'resultType']);
    expect(body.result['_meta']).toEqual({ trace: 'x', ...IDENTITY });
  });
});
