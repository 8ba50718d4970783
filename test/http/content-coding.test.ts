import { gzipSync } from 'node:zlib';
import { describe, expect, it } from 'vitest';
import { serverWithMcpTokens } from '../agency-mcp/helpers.js';
import { ENGINE } from '../helpers/harness.js';

/**
 * A compressed request body (`Content-Encoding: gzip`), which no surface decodes: refused with 415 and
 * `Accept-Encoding: identity` (RFC 9110 §15.5.16, §12.5.3) in each surface's error shape, before the body is read.
 * Before, it was read as it came, and the client was told its JSON or its form was broken.
 */

const env = serverWithMcpTokens();

const SIGN_IN = JSON.stringify({ username: 'ada', password: 'ada-demo-password' });
const TOOL_CALL = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'tools/call',
  params: { name: 'get_me', arguments: {} },
});

function post(url: string, type: string, body: string, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': type, 'content-encoding': 'gzip', ...headers },
    body: gzipSync(body),
  });
}

describe(`compressed request bodies (${ENGINE})`, () => {
  it('the session API: 415 unsupported_media_type naming content-encoding (was 400 invalid_json)', async () => {
    const res = await post(`${env.server.url.auth}/api/sessions`, 'application/json', SIGN_IN);
    expect(res.status).toBe(415);
    expect(res.headers.get('accept-encoding')).toBe('identity');
    expect(await res.json()).toMatchObject({
      error: { code: 'unsupported_media_type', param: 'content-encoding' },
    });
  });

  it('the token endpoint: 415 in the RFC 6749 shape', async () => {
    const form = 'grant_type=refresh_token&refresh_token=x&client_id=y';
    const res = await post(`${env.server.url.auth}/oauth/token`, 'application/x-www-form-urlencoded', form);
    expect(res.status).toBe(415);
    expect(res.headers.get('accept-encoding')).toBe('identity');
    expect(await res.json()).toEqual({
      error: 'invalid_request',
      error_description: 'The request body must be sent uncompressed: Content-Encoding gzip is not accepted',
    });
  });

  it("the token endpoint's fast path too: a form labelled gzip is not read, even when it was sent plain", async () => {
    // Read as it came, it was answered by the form fast path (invalid_grant), where Fastify's path said 415.
    const res = await fetch(`${env.server.url.auth}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', 'content-encoding': 'gzip' },
      body: 'grant_type=refresh_token&refresh_token=x&client_id=y',
    });
    expect(res.status).toBe(415);
    expect(await res.json()).toMatchObject({ error: 'invalid_request' });
  });

  for (const surface of ['mcp', 'agencyMcp'] as const) {
    it(`${surface}: 415 as JSON-RPC (was -32700, a parse error)`, async () => {
      const res = await post(`${env.server.url[surface]}/mcp`, 'application/json', TOOL_CALL, {
        authorization: `Bearer ${env.token[surface]}`,
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2025-11-25',
      });
      expect(res.status).toBe(415);
      expect(res.headers.get('accept-encoding')).toBe('identity');
      expect(await res.json()).toMatchObject({
        jsonrpc: '2.0',
        error: { code: -32000, message: expect.stringContaining('Content-Encoding gzip') },
      });
    });
  }

  it('Content-Encoding: identity is the body as it is', async () => {
    const res = await fetch(`${env.server.url.auth}/api/sessions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-encoding': 'identity' },
      body: SIGN_IN,
    });
    expect(res.status).toBe(201);
  });
});
