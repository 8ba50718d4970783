import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify';
import fp from 'fastify-plugin';
import { isDependencyOutage, OUTAGE_RETRY_AFTER_SECONDS } from './dependency-outage.js';
import { ApiError } from './errors.js';

const METHODS: HTTPMethods[] = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

export interface RestErrorsOptions {
  /** Headers every error response of the surface carries (the REST API's `Svc-Version`, docs/contract.md#errors). */
  errorHeaders?: (request: FastifyRequest) => Record<string, string>;
}

/**
 * Renders every non-2xx of a REST surface as the error object of docs/contract.md#errors: thrown ApiErrors as they are, Fastify's own
 * errors mapped to catalogue codes, unknown routes as 404 or 405 (with `Allow`), anything else as a 500 whose
 * details go to the log under the request id and never into the body.
 */
export const restErrors = fp<RestErrorsOptions>(
  async (app: FastifyInstance, options) => {
    const send = (request: FastifyRequest, reply: FastifyReply, error: ApiError) => {
      if (options.errorHeaders) reply.headers(options.errorHeaders(request));
      return sendApiError(request, reply, error);
    };

    app.setErrorHandler((error, request, reply) =>
      send(request, reply, toApiError(error as FastifyError, request)),
    );

    app.setNotFoundHandler((request, reply) => {
      const path = request.url.split('?')[0] ?? '/';
      const allowed = METHODS.filter((method) => app.findRoute({ method, url: path }) !== null);
      if (allowed.length === 0) {
        return send(
          request,
          reply,
          new ApiError('route_not_found', `No route for ${request.method} ${path}`),
        );
      }
      const message = `${request.method} is not allowed on ${path}; use ${allowed.join(', ')}`;
      return send(
        request,
        reply,
        new ApiError('method_not_allowed', message, { headers: { allow: allowed.join(', ') } }),
      );
    });
  },
  { name: 'rest-errors' },
);

/** Sends an ApiError as the error object, with the headers it carries (`WWW-Authenticate`, `Retry-After`, `Allow`). */
export function sendApiError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.options.headers) reply.headers(error.options.headers);
  return reply.code(error.status).type('application/json; charset=utf-8').send(error.body(request.id));
}

function toApiError(error: FastifyError | Error, request: FastifyRequest): ApiError {
  if (error instanceof ApiError) return error;
  const e = error as FastifyError;
  switch (e.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('body_too_large', 'The request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', 'Send the body as application/json', {
        param: 'content-type',
      });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_json', 'The request body is not valid JSON');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the body', {
        param: 'content-length',
      });
  }
  if (e.statusCode === 400 && e.validation) return new ApiError('invalid_request', e.message);
  if (isDependencyOutage(error)) {
    return new ApiError('service_unavailable', 'A service this request needs is unavailable; retry', {
      headers: { 'retry-after': String(OUTAGE_RETRY_AFTER_SECONDS) },
    });
  }
  if (e.statusCode === 503) return new ApiError('service_unavailable', 'The server is shutting down; retry');
  request.log.error({ err: error }, 'unhandled error');
  return new ApiError(
    'internal_error',
    'An internal error occurred; quote the request id when you report it',
  );
}
