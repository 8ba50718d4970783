import type { FastifyInstance } from 'fastify';
import { OAuthError } from '../http/oauth-errors.js';
import { queryOf } from '../http/request-target.js';

/** Registers the application/x-www-form-urlencoded parser (RFC 6749 §3.2, HTML forms) in the current scope. */
export function acceptForms(app: FastifyInstance): void {
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string' },
    (_request, body, done) => done(null, new URLSearchParams(body as string)),
  );
}

/** Parameters of a request: a form body or a query string. */
export class Params {
  constructor(readonly raw: URLSearchParams) {}

  static fromQuery(url: string): Params {
    return new Params(new URLSearchParams(queryOf(url)));
  }

  static fromBody(body: unknown): Params {
    if (!(body instanceof URLSearchParams)) {
      throw new OAuthError('invalid_request', 'Send the parameters as application/x-www-form-urlencoded');
    }
    return new Params(body);
  }

  /**
   * One parameter. RFC 6749 §3.1/§3.2: parameters must not be repeated, and a parameter sent without a value is
   * treated as omitted.
   */
  get(name: string): string | undefined {
    const all = this.raw.getAll(name);
    if (all.length > 1) throw new OAuthError('invalid_request', `The ${name} parameter is repeated`);
    return all[0] === '' ? undefined : all[0];
  }

  require(name: string): string {
    const v = this.get(name);
    if (v === undefined) throw new OAuthError('invalid_request', `The ${name} parameter is missing`);
    return v;
  }

  repeated(name: string): boolean {
    return this.raw.getAll(name).length > 1;
  }

  has(name: string): boolean {
    return this.raw.has(name);
  }

  all(name: string): string[] {
    return this.raw.getAll(name);
  }
}
