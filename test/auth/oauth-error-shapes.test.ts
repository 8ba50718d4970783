import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENGINE, startTestServer, type TestServer } from '../helpers/harness.js';

/**
 * Every refusal of the authorization server's OAuth JSON endpoints is an RFC 6749 §5.2 error, which OAuth clients
 * parse (`error` a string): a body they cannot read, with a description that says what to send (every such refusal
 * read "The request body could not be read"), and a wrong method or path under /oauth (answered in the REST error
 * object, whose `error` is an object, until the endpoints had a not-found handler of their own).
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
  return oauthError(response, 400);
}

async function oauthError(response: Response, status: number) {
  expect(response.status).toBe(status);
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

describe(`OAuth endpoints answer a wrong method or path in their own shape (${ENGINE})`, () => {
  it('a method an endpoint does not take is 405 with Allow, as an RFC 6749 error', async () => {
    for (const [method, path] of [
      ['GET', '/oauth/token'],
      ['PUT', '/oauth/revoke'],
      ['DELETE', '/oauth/register'],
    ] as const) {
      const response = await fetch(`${server.url.auth}${path}`, { method });
      expect(response.headers.get('allow')).toBe('POST, OPTIONS');
      expect(await oauthError(response, 405)).toBe(`${method} is not allowed on ${path}; use POST, OPTIONS`);
    }
  });

  it('a path under /oauth that is no endpoint is 404, as an RFC 6749 error', async () => {
    const response = await fetch(`${server.url.auth}/oauth/tokens`, { method: 'POST' });
    expect(await oauthError(response, 404)).toBe('No route for POST /oauth/tokens');
  });

  it('outside /oauth, a route miss keeps the REST error object', async () => {
    const response = await fetch(`${server.url.auth}/api/sessions`, { method: 'GET' });
    expect(response.status).toBe(405);
    const answer = (await response.json()) as { error: { code: string } };
    expect(answer.error.code).toBe('method_not_allowed');
  });
});
