import { ProtocolError, ProtocolErrorCode, Server, specTypeSchemas } from '@modelcontextprotocol/server';
import { issueText } from '../base/issue-text.js';

/**
 * JSON-RPC 2.0 §5.1: params that do not fit the method are `-32602 Invalid params`, the caller's error. The SDK
 * (2.4.0) answers a spec method's schema-invalid params (`resources/read` without `uri`, `tools/list` with a numeric
 * `cursor`, `logging/setLevel` with an unknown level, `initialize` without `protocolVersion`) with `-32603 Internal
 * error`, telling the caller the server broke, and `tools/call`'s with `-32602`; both with the schema library's issues
 * as a multi-line JSON dump for a message (typescript-sdk#2284: the dispatch's parse failure is thrown as a bare
 * Error). Here each handler the SDK registers, on either MCP host, first checks its request against the spec's schema
 * for the method (the SDK's own, `specTypeSchemas`) and refuses a misfit as `-32602` naming each field:
 * `Invalid params for resources/read: uri: expected string, received undefined`.
 *
 * Through `Server`'s `_wrapHandler`, the hook its subclasses use to wrap every registered handler (the SDK's typings
 * document it), so the check runs where the SDK's own would, after the envelope, version and method checks, and only
 * for methods the server serves (another is still `-32601`). The handlers `Server`'s constructor registers
 * (`initialize`, `ping`, `logging/setLevel`) are wrapped too, hence the prototype, once per process.
 */
export function checkParamsBeforeHandlers(): void {
  if (installed) return;
  installed = true;
  const prototype = Server.prototype as unknown as { _wrapHandler: WrapHandler };
  const wrap = prototype._wrapHandler;
  prototype._wrapHandler = function (this: Server, method, handler) {
    const wrapped = wrap.call(this, method, handler);
    const schema = REQUEST_SCHEMAS.get(method);
    if (schema === undefined) return wrapped;
    return async (request, ctx) => {
      const checked = schema['~standard'].validate(request);
      if ('issues' in checked && checked.issues) {
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, invalidParams(method, checked.issues));
      }
      return wrapped(request, ctx);
    };
  };
}

let installed = false;

type Handler = (request: unknown, ctx: unknown) => Promise<unknown>;
type WrapHandler = (this: Server, method: string, handler: Handler) => Handler;
type RequestSchema = (typeof specTypeSchemas)[keyof typeof specTypeSchemas];

/** The spec's request schemas by method (`ReadResourceRequest` by `resources/read`, ...). */
const REQUEST_SCHEMAS = new Map<string, RequestSchema>(
  Object.values(specTypeSchemas).flatMap((schema) => {
    const method = (schema as { shape?: { method?: { value?: unknown } } }).shape?.method?.value;
    return typeof method === 'string' ? [[method, schema] as const] : [];
  }),
);

interface Issue {
  readonly message: string;
  readonly path?: ReadonlyArray<PropertyKey | { readonly key: PropertyKey }> | undefined;
}

/** One line naming each field at fault by its place in `params` (`uri`, `arguments`; `params` when it is params). */
function invalidParams(method: string, issues: readonly Issue[]): string {
  const problems = issues.map((issue) => {
    const path = (issue.path ?? []).map((segment) =>
      String(typeof segment === 'object' ? segment.key : segment),
    );
    const field =
      path.length > 1 && path[0] === 'params' ? path.slice(1).join('.') : path.join('.') || 'request';
    return `${field}: ${issueText(issue.message)}`;
  });
  return `Invalid params for ${method}: ${problems.join('; ')}`;
}
