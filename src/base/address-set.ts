import { BlockList, isIPv4, isIPv6 } from 'node:net';

/**
 * A set of network addresses an operator names (TRUST_PROXY): single addresses and CIDR blocks, matched with
 * node:net's BlockList. The three names are the ranges proxy-addr (Fastify's, Express's) knows by them, so a list
 * written for those reads the same here.
 */

const NAMED_RANGES: Readonly<Record<string, readonly string[]>> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

interface Block {
  network: string;
  prefix: number;
  family: 'ipv4' | 'ipv6';
}

/** One entry as blocks: a name above, an address (`192.0.2.1`, `2001:db8::1`), or `address/prefix`; else undefined. */
function blocksOf(entry: string): Block[] | undefined {
  const named = NAMED_RANGES[entry];
  if (named) return named.map((range) => blocksOf(range)![0]!);
  const slash = entry.indexOf('/');
  const network = slash < 0 ? entry : entry.slice(0, slash);
  const family = isIPv4(network) ? 'ipv4' : isIPv6(network) && !network.includes('%') ? 'ipv6' : undefined;
  if (!family) return undefined;
  const longest = family === 'ipv4' ? 32 : 128;
  const bits = slash < 0 ? String(longest) : entry.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bits) || Number(bits) > longest) return undefined;
  return [{ network, prefix: Number(bits), family }];
}

/** Whether `entry` names addresses: a name (`loopback`, `linklocal`, `uniquelocal`), an address or a CIDR block. */
export function isAddressEntry(entry: string): boolean {
  return blocksOf(entry) !== undefined;
}

export interface AddressSet {
  /** Whether the address is in the set; false for anything that is not an address (a header's free text). */
  has(address: string): boolean;
}

/** The set of the entries (each one `isAddressEntry` accepts). */
export function addressSet(entries: readonly string[]): AddressSet {
  const list = new BlockList();
  for (const entry of entries) {
    const blocks = blocksOf(entry);
    if (!blocks) throw new TypeError(`not an address, CIDR block or range name: ${entry}`);
    for (const { network, prefix, family } of blocks) list.addSubnet(network, prefix, family);
  }
  return {
    has(entry) {
      const named = addressOf(entry);
      return named !== undefined && !named.address.includes('%') && list.check(named.address, named.family);
    },
  };
}

const IPV4_WITH_PORT = /^(\d{1,3}(?:\.\d{1,3}){3}):\d{1,5}$/;
const BRACKETED_IPV6 = /^\[([0-9A-Fa-f:.]+)\](?::\d{1,5})?$/;

/**
 * The address of an `X-Forwarded-For` entry written with its port, as some proxies do (Azure's Application Gateway:
 * `203.0.113.7:4711`, `[2001:db8::7]:4711`); any other text as it is. Keyed with its port, one client would be a new
 * address per connection to every limit counted per address.
 */
export function withoutPort(entry: string): string {
  const match = IPV4_WITH_PORT.exec(entry) ?? BRACKETED_IPV6.exec(entry);
  return match ? match[1]! : entry;
}

/**
 * The network a client address stands for wherever something is counted per client (the rate limits, the connection
 * cap): an IPv4 address as it is, an IPv6 address as its /64 (`2001:db8:0:7::/64`). A host is given at least a /64
 * (the smallest subnet stateless autoconfiguration works on, RFC 4291 §2.5.1, RFC 6177), and can take any address in
 * it, a new one per attempt: counted by the /64, it has one budget, as an IPv4 host behind its one address has. An
 * IPv4 peer of a dual-stack socket (`::ffff:a.b.c.d`) is its IPv4 address; a written port is dropped; anything that is
 * no address is returned as it is.
 */
export function networkOf(address: string): string {
  const named = addressOf(address);
  if (!named) return address;
  if (named.family === 'ipv4') return named.address;
  return `${ipv6Groups(named.address.split('%', 1)[0]!).slice(0, 4).join(':')}::/64`;
}

/**
 * The address an entry names and its family, undefined for text that names none: a written port dropped, and a
 * dual-stack socket's IPv4 peer (`::ffff:a.b.c.d`) read as the IPv4 address it is. An IPv6 zone (`%eth0`) is kept.
 */
function addressOf(entry: string): { address: string; family: 'ipv4' | 'ipv6' } | undefined {
  const bare = withoutPort(entry);
  const unmapped = bare.toLowerCase().startsWith('::ffff:') ? bare.slice(7) : bare;
  if (isIPv4(unmapped)) return { address: unmapped, family: 'ipv4' };
  return isIPv6(bare) ? { address: bare, family: 'ipv6' } : undefined;
}

/** The eight 16-bit groups of a valid IPv6 address, in hex without leading zeros (`::` expanded, an IPv4 tail read). */
function ipv6Groups(address: string): string[] {
  const [head, tail] = address.includes('::') ? address.split('::') : [address, undefined];
  const groups = (part: string | undefined): string[] =>
    !part
      ? []
      : part.split(':').flatMap((group) => {
          if (!group.includes('.')) return [group];
          const [a, b, c, d] = group.split('.').map(Number) as [number, number, number, number];
          return [((a << 8) | b).toString(16), ((c << 8) | d).toString(16)];
        });
  const front = groups(head);
  const back = groups(tail);
  const zeros = tail === undefined ? [] : Array<string>(8 - front.length - back.length).fill('0');
  return [...front, ...zeros, ...back].map((group) => parseInt(group, 16).toString(16));
}
