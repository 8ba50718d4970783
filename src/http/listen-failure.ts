/**
 * Why a port could not be bound, told so that an operator knows what to change. Node's own message names neither the
 * surface nor the setting (`listen EADDRINUSE: address already in use 127.0.0.1:4000`), and with DATABASE_URL set
 * `svc` read EADDRNOTAVAIL, a network code, as PostgreSQL's failure and said so.
 */
export class ListenFailure extends Error {
  override name = 'ListenFailure';
}

/** What each code means for a port the service binds, beside Node's message. */
const REASONS: Record<string, string> = {
  EADDRINUSE: 'another process listens there',
  EADDRNOTAVAIL: 'that is not an address of this machine',
  EACCES: 'a port below 1024 needs privileges this process does not have',
};

/**
 * `error` as a ListenFailure naming `what` (`the api surface`) and its settings (`HOST, API_PORT`) when it is a
 * failure to bind (Node's `syscall` `listen`); any other error as it is.
 */
export function asListenFailure(error: unknown, what: string, settings: string): unknown {
  const e = error as (NodeJS.ErrnoException & { address?: string; port?: number }) | null;
  if (e?.syscall !== 'listen') return error;
  const reason = (e.code && REASONS[e.code]) ?? e.message;
  // Node gives no port when the one asked for was 0 (any free port).
  const where = e.port === undefined ? e.address : `${e.address}:${e.port}`;
  return new ListenFailure(`${what} cannot listen on ${where} (${settings}): ${reason} (${e.code})`);
}
