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
      const address = withoutPort(entry);
      // A dual-stack socket reports an IPv4 peer as `::ffff:a.b.c.d`: it is matched as the IPv4 address it is.
      const v4 = address.startsWith('::ffff:') ? address.slice(7) : address;
      if (isIPv4(v4)) return list.check(v4, 'ipv4');
      return isIPv6(address) && !address.includes('%') && list.check(address, 'ipv6');
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
