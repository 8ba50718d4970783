import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * A body the authorization server's OAuth endpoints cannot read is an RFC 6749 §5.2 error whose description says
 * what to send: every such refusal read "The request body could not be read", the same for a wrong media type, a
 * broken JSON body and a wrong Content-Length.
 */

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server?.close());

async function refusal(path: string, contentType: string, body: string) {
  const response = await fetch(`${server.url.auth}${path}`, {
    method: 'POST',
    headers: { 'content-type': contentType },
    body,
  });
  expect(response.status).toBe(400);
  expect(response.headers.get('cache-control')).toBe('no-store');
  const answer = (await response.json()) as Record<string, string>;
  expect(Object.keys(answer).sort()).toEqual(['error', 'error_description']);
  expect(answer['error']).toBe('invalid_request');
  return answer['error_description'];
}

describe(`OAuth endpoints refuse a body they cannot read, saying what to send (${ENGINE})`, () => {
  it('a media type the endpoint does not read names the ones it does', async () => {
    const form = 'grant_type=refresh_token&refresh_token=x&client_id=y';
    for (const path of ['/oauth/token', '/oauth/revoke', '/oauth/register']) {
      expect(await refusal(path, 'text/plain', form)).toMatch(
        /Content-Type is not accepted here: .*application\/x-www-form-urlencoded.*registration application\/json/,
      );
    }
  });

  it('a JSON body that is not JSON says so', async () => {
    expect(await refusal('/oauth/register', 'application/json', '{"redirect_uris": [')).toBe(
      'The request body is not valid JSON',
    );
  });

  it('JSON sent to the token endpoint is told to send a form', async () => {
    expect(await refusal('/oauth/token', 'application/json', '{"grant_type":"refresh_token"}')).toBe(
      'Send the parameters as application/x-www-form-urlencoded',
    );
  });
});
