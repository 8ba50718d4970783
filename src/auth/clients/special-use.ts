import { BlockList, isIP } from 'node:net';

/**
 * Special-use addresses (RFC 6890 and the IANA special-purpose registries): a Client ID Metadata Document is never
 * fetched from these, so a client id cannot make the server reach loopback, private or link-local hosts (SSRF).
 */
const SPECIAL = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  SPECIAL.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['::ffff:0:0', 96],
  ['64:ff9b::', 96],
  ['64:ff9b:1::', 48],
  ['100::', 64],
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const) {
  SPECIAL.addSubnet(net, prefix, 'ipv6');
}

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** Whether a connected or resolved address is special-use; `allowLoopback` is the test-only exception. */
export function isSpecialUse(address: string, allowLoopback = false): boolean {
  let a = address.startsWith('[') ? address.slice(1, -1) : address;
  // IPv4-mapped IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it carries.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(a);
  if (mapped) a = mapped[1]!;
  const family = isIP(a);
  if (family === 0) return true;
  const type = family === 4 ? 'ipv4' : 'ipv6';
  if (allowLoopback && LOOPBACK.check(a, type)) return false;
  return SPECIAL.check(a, type);
}
