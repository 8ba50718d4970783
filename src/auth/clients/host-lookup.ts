import type { LookupAddress } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import type { LookupFunction } from 'node:net';

/**
 * Name resolution for a fetch a client's request starts (a Client ID Metadata Document's host), by c-ares
 * (`dns.Resolver`), not by the `dns.lookup` a socket uses by default.
 *
 * `dns.lookup` is getaddrinfo on libuv's thread pool, which runs at most two at a time for the whole process, and an
 * abandoned lookup runs on to the system resolver's own limit (10 s with glibc's defaults). Measured by hand with a
 * name server that never answers: four lookups took 10, 10, 20 and 20 s, and every other lookup of the process —
 * PostgreSQL's and Redis's connections by host name, `localhost` included — queued behind them. A client that names
 * hosts whose name server never answers (its own) in `client_id`s could keep that queue growing, a fetch's 3 s limit
 * releasing its place while its lookup stayed queued. c-ares runs on the event loop, its queries are cancelled with
 * the fetch, and `/etc/hosts` is not read (a metadata document is on a public host).
 */
export interface HostLookup {
  /** For `net`/`https` `lookup`: every address of the host, IPv4 first, that `keep` accepts. */
  lookup: LookupFunction;
  /** Ends the queries still under way (the fetch is over). */
  cancel(): void;
}

export interface HostLookupOptions {
  /** The longest a query waits for an answer (per try; two tries). */
  timeoutMs: number;
  /** Name servers (`address` or `address:port`) in place of the system's; tests only. */
  servers?: readonly string[];
  /** Whether an answer's address may be connected to. */
  keep(address: string): boolean;
  /** The error for a name whose every address `keep` refused. */
  refused(): Error;
}

export function hostLookup(o: HostLookupOptions): HostLookup {
  const resolver = new Resolver({ timeout: Math.max(1, Math.ceil(o.timeoutMs / 2)), tries: 2 });
  if (o.servers?.length) resolver.setServers([...o.servers]);
  const lookup = ((hostname: string, options: { family?: number; all?: boolean }, callback: LookupCallback) => {
    resolveBoth(resolver, hostname, options.family).then(
      (found) => {
        const kept = found.filter((a) => o.keep(a.address));
        if (kept.length === 0) return callback(found.length ? o.refused() : notFound(hostname), '', 0);
        if (options.all) return (callback as unknown as AllCallback)(null, kept);
        return callback(null, kept[0]!.address, kept[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, '', 0),
    );
  }) as unknown as LookupFunction;
  return { lookup, cancel: () => resolver.cancel() };
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string, family: number) => void;
type AllCallback = (error: null, addresses: LookupAddress[]) => void;

/** The host's A and AAAA answers (one family when asked), asked at once; an error only when no address came back. */
async function resolveBoth(resolver: Resolver, hostname: string, family?: number): Promise<LookupAddress[]> {
  const [v4, v6] = await Promise.allSettled([
    family === 6 ? Promise.resolve([]) : resolver.resolve4(hostname),
    family === 4 ? Promise.resolve([]) : resolver.resolve6(hostname),
  ]);
  const found = [
    ...(v4.status === 'fulfilled' ? v4.value.map((address) => ({ address, family: 4 })) : []),
    ...(v6.status === 'fulfilled' ? v6.value.map((address) => ({ address, family: 6 })) : []),
  ];
  if (found.length === 0 && v4.status === 'rejected') throw v4.reason;
  if (found.length === 0 && v6.status === 'rejected') throw v6.reason;
  return found;
}

function notFound(hostname: string): NodeJS.ErrnoException {
  return Object.assign(new Error(`no address for ${hostname}`), { code: 'ENOTFOUND' });
}
