import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { noteAnsweredError } from './answered-error.js';
import { ApiError } from './errors.js';
import {
  classifyError,
  type ErrorClass,
  renderErrors,
  type RouteMiss,
  routeMissMessage,
} from './framework-errors.js';

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
    renderErrors(app, {
      own: (error, request, reply) => (error instanceof ApiError ? send(request, reply, error) : undefined),
      classified: (error, request, reply) => send(request, reply, toApiError(error)),
      routeMiss: (miss, request, reply) => send(request, reply, missToApiError(miss, request.method)),
    });
  },
  { name: 'rest-errors' },
);

/** Sends an ApiError as the error object, with the headers it carries (`WWW-Authenticate`, `Retry-After`, `Allow`). */
export function sendApiError(request: FastifyRequest, reply: FastifyReply, error: ApiError): FastifyReply {
  if (error.options.headers) reply.headers(error.options.headers);
  noteAnsweredError(request.raw, error.code);
  return reply.code(error.status).type('application/json; charset=utf-8').send(error.body(request.id));
}

/**
 * Any error as the REST error object a REST route would answer with: an ApiError as it is, anything else by its class
 * (the dashboard API's in-process calls use it, so that they answer as its HTTP routes do).
 */
export function apiErrorOf(error: unknown): ApiError {
  return error instanceof ApiError ? error : toApiError(classifyError(error));
}

/** The catalogue code of each class of error (docs/contract.md#errors). */
function toApiError(error: ErrorClass): ApiError {
  switch (error.kind) {
    case 'body_too_large':
      return new ApiError('body_too_large', 'The request body is too large');
    case 'unsupported_media_type':
      return new ApiError('unsupported_media_type', 'Send the body as application/json', {
        param: 'content-type',
      });
    case 'unsupported_content_coding':
      return new ApiError(
        'unsupported_media_type',
        `Send the body uncompressed: ${error.coding} is not accepted`,
        {
          param: 'content-encoding',
        },
      );
    case 'invalid_json':
      return new ApiError('invalid_json', 'The request body is not valid JSON');
    case 'invalid_content_length':
      return new ApiError('invalid_request', 'Content-Length does not match the body', {
        param: 'content-length',
      });
    case 'invalid_request':
      return new ApiError('invalid_request', error.message ?? 'The request could not be read');
    case 'unavailable':
      return error.retryAfterSeconds === undefined
        ? new ApiError('service_unavailable', 'The server is shutting down; retry')
        : ApiError.unavailable();
    case 'internal':
      return new ApiError(
        'internal_error',
        'An internal error occurred; quote the request id when you report it',
      );
  }
}

const missToApiError = (miss: RouteMiss, method: string): ApiError =>
  new ApiError(miss.kind, routeMissMessage(miss, method));
