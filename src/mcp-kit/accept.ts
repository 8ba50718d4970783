import Negotiator from 'negotiator';

/**
 * Whether a request's Accept admits an event stream, the answer the 2025-era transport gives every request
 * (Streamable HTTP, 2025-11-25 §Sending Messages to the Server). Read as RFC 9110 §12.5.1 reads it, which the SDK's
 * transport does not: it looks for both media types' names in the header, so the range of every type (`*`, a slash,
 * `*`: generic HTTP clients, a browser), `text/event-stream` alone (hosts that only stream) and no Accept at all (any
 * media type) got 406, while `text/event-stream;q=0` passed. The MCP spec asks clients to list both types; a client
 * whose Accept admits the answer is served whatever it listed.
 */

/** What every SDK client sends: judged without parsing, on the hot path. */
const SDK_CLIENTS_ACCEPT = 'application/json, text/event-stream';
const EVENT_STREAM = ['text/event-stream'];

export function acceptsEventStream(accept: string | undefined): boolean {
  if (accept === undefined || accept === SDK_CLIENTS_ACCEPT) return true;
  return new Negotiator({ headers: { accept } }).mediaType(EVENT_STREAM) !== undefined;
}

/**
 * The Accept handed to the SDK's transport, which refuses with 406 what does not name both types: both, when the
 * client's Accept admits the stream; none (so 406) when it does not.
 */
export const acceptForSdk = (accept: string | undefined): string | undefined =>
  acceptsEventStream(accept) ? SDK_CLIENTS_ACCEPT : undefined;
