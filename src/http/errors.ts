/**
 * The REST error object (docs/contract.md#errors) and the catalogue of stable codes. Clients branch on `code`; `message` is for
 * people. The README's error catalogue mirrors this table (a test keeps them in step).
 */

export type ErrorType =
  'invalid_request_error' | 'authentication_error' | 'permission_error' | 'rate_limit_error' | 'api_error';

interface CatalogueEntry {
  status: number;
  type: ErrorType;
  meaning: string;
}

export const ERROR_CATALOGUE = {
  invalid_request: {
    status: 400,
    type: 'invalid_request_error',
    meaning: 'A parameter or the body is invalid; `param` names it.',
  },
  invalid_json: { status: 400, type: 'invalid_request_error', meaning: 'The body is not valid JSON.' },
  invalid_api_version: {
    status: 400,
    type: 'invalid_request_error',
    meaning:
      'The `Svc-Version` header is malformed, unknown, empty or repeated; the message lists the supported versions.',
  },
  route_not_found: { status: 404, type: 'invalid_request_error', meaning: 'No route has this path.' },
  resource_not_found: {
    status: 404,
    type: 'invalid_request_error',
    meaning: 'The object named in the path does not exist or is not yours.',
  },
  method_not_allowed: {
    status: 405,
    type: 'invalid_request_error',
    meaning: 'The path exists but not with this method; `Allow` lists the methods.',
  },
  conflict: {
    status: 409,
    type: 'invalid_request_error',
    meaning: 'The request conflicts with existing data (for example a taken username).',
  },
  body_too_large: {
    status: 413,
    type: 'invalid_request_error',
    meaning: 'The body is larger than BODY_LIMIT_BYTES.',
  },
  unsupported_media_type: {
    status: 415,
    type: 'invalid_request_error',
    meaning:
      'The body is not `application/json`, or is compressed (`Content-Encoding`, with `Accept-Encoding: identity`).',
  },
  request_timeout: {
    status: 408,
    type: 'invalid_request_error',
    meaning: 'The request (headers and body) was not sent within REQUEST_TIMEOUT_SECONDS.',
  },
  headers_too_large: {
    status: 431,
    type: 'invalid_request_error',
    meaning: 'The request headers are larger than MAX_HEADER_BYTES.',
  },
  missing_token: { status: 401, type: 'authentication_error', meaning: 'No bearer token was sent.' },
  invalid_authorization_header: {
    status: 401,
    type: 'authentication_error',
    meaning: 'The Authorization header is not exactly one `Bearer <token>`.',
  },
  invalid_token: {
    status: 401,
    type: 'authentication_error',
    meaning: 'The token is malformed, badly signed, from another issuer, of another kind, or not valid yet.',
  },
  token_expired: { status: 401, type: 'authentication_error', meaning: 'The token has expired.' },
  token_revoked: {
    status: 401,
    type: 'authentication_error',
    meaning: 'The session or connection behind the token has ended.',
  },
  wrong_audience: {
    status: 401,
    type: 'authentication_error',
    meaning: 'The token was issued for another resource.',
  },
  invalid_credentials: {
    status: 401,
    type: 'authentication_error',
    meaning: 'The username or password is wrong (one message for both).',
  },
  insufficient_scope: {
    status: 403,
    type: 'permission_error',
    meaning: 'The OAuth token lacks the scope the operation needs.',
  },
  missing_permission: {
    status: 403,
    type: 'permission_error',
    meaning:
      'The caller lacks the permission the operation needs (docs/contract.md#permissions: connection ceiling ∩ role ∩ write rules); `param` and the message name it.',
  },
  rate_limited: {
    status: 429,
    type: 'rate_limit_error',
    meaning: 'Too many requests; `Retry-After` says when to try again.',
  },
  internal_error: {
    status: 500,
    type: 'api_error',
    meaning: 'Something failed on our side; quote the request id.',
  },
  service_unavailable: {
    status: 503,
    type: 'api_error',
    meaning: 'The server is shutting down or a dependency is down; retry.',
  },
} as const satisfies Record<string, CatalogueEntry>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export interface ErrorBody {
  error: { type: ErrorType; code: ErrorCode; message: string; param?: string; request_id: string };
}

/** A REST error with a catalogue code. Thrown anywhere in a REST handler; the errors plugin renders it. */
/** What every surface says when a dependency it needs is down (answered 503 with Retry-After). */
export const UNAVAILABLE_MESSAGE = 'A service this request needs is unavailable; retry';

export class ApiError extends Error {
  override name = 'ApiError';

  /** 503 `service_unavailable`: a dependency is down (an outage, logged once by its watch). */
  static unavailable(): ApiError {
    return new ApiError('service_unavailable', UNAVAILABLE_MESSAGE);
  }

  readonly status: number;
  readonly type: ErrorType;

  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: { param?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.status = ERROR_CATALOGUE[code].status;
    this.type = ERROR_CATALOGUE[code].type;
  }

  body(requestId: string): ErrorBody {
    const { param } = this.options;
    return {
      error: {
        type: this.type,
        code: this.code,
        message: this.message,
        ...(param === undefined ? {} : { param }),
        request_id: requestId,
      },
    };
  }
}
