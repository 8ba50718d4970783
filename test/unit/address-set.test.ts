import { describe, expect, it } from 'vitest';
import { addressSet, isAddressEntry, networkOf, withoutPort } from '../../src/base/address-set.js';

describe('a set of addresses named by an operator (TRUST_PROXY)', () => {
  it('holds single addresses and CIDR blocks of both families, and nothing around them', () => {
    const set = addressSet(['192.0.2.10', '10.0.0.0/8', '2001:db8::/32']);
    expect(set.has('192.0.2.10')).toBe(true);
    expect(set.has('192.0.2.11')).toBe(false);
    expect(set.has('10.255.255.255')).toBe(true);
    expect(set.has('11.0.0.0')).toBe(false);
    expect(set.has('2001:db8:ffff::1')).toBe(true);
    expect(set.has('2001:db9::1')).toBe(false);
  });

  it('matches an IPv4 peer as a dual-stack socket reports it (::ffff:a.b.c.d)', () => {
    const set = addressSet(['loopback']);
    expect(set.has('::ffff:127.0.0.1')).toBe(true);
    expect(set.has('::ffff:192.0.2.1')).toBe(false);
    expect(set.has('::1')).toBe(true);
  });

  it("knows proxy-addr's range names", () => {
    const set = addressSet(['uniquelocal', 'linklocal']);
    for (const inside of ['10.1.2.3', '172.31.0.1', '192.168.1.1', 'fd00::1', '169.254.1.1', 'fe80::1'])
      expect(set.has(inside), inside).toBe(true);
    for (const outside of ['172.32.0.1', '127.0.0.1', '203.0.113.1', '2001:db8::1'])
      expect(set.has(outside), outside).toBe(false);
  });

  it('is false, never an error, for what a header may carry that is no address', () => {
    const set = addressSet(['0.0.0.0/0', '::/0']);
    for (const text of [
      '',
      'unknown',
      '203.0.113.7:4711x',
      '[2001:db8::1',
      'fe80::1%eth0',
      '1.2.3.4, 5.6.7.8',
    ])
      expect(set.has(text), text).toBe(false);
  });

  it('accepts as entries only addresses, CIDR blocks with a prefix in range, and the names', () => {
    for (const entry of ['192.0.2.1', '192.0.2.0/24', '::1', '2001:db8::/32', 'loopback', '0.0.0.0/0'])
      expect(isAddressEntry(entry), entry).toBe(true);
    for (const entry of [
      '',
      'on',
      '192.0.2.0/33',
      '::/129',
      '192.0.2.0/',
      '192.0.2.0/x',
      'localhost',
      '10.0.0.0/08x',
    ])
      expect(isAddressEntry(entry), entry).toBe(false);
    expect(() => addressSet(['nope'])).toThrow(TypeError);
  });

  it('reads an entry written with its port (a proxy that appends `address:port`) as the address', () => {
    expect(withoutPort('203.0.113.7:4711')).toBe('203.0.113.7');
    expect(withoutPort('[2001:db8::7]:4711')).toBe('2001:db8::7');
    expect(withoutPort('[2001:db8::7]')).toBe('2001:db8::7');
    for (const as of ['203.0.113.7', '2001:db8::7', '::ffff:127.0.0.1', 'unknown', '1.2.3.4:99999x'])
      expect(withoutPort(as)).toBe(as);
    expect(addressSet(['10.0.0.0/8']).has('10.1.2.3:443')).toBe(true);
    expect(addressSet(['2001:db8::/32']).has('[2001:db8::9]:443')).toBe(true);
  });

  it("counts a client by its IPv4 address, or by its IPv6 address's /64 (one host can take any address in it)", () => {
    expect(networkOf('2001:db8:0:7:1:2:3:4')).toBe('2001:db8:0:7::/64');
    expect(networkOf('2001:0db8:0000:0007::ffff')).toBe('2001:db8:0:7::/64');
    expect(networkOf('2001:db8::1')).toBe('2001:db8:0:0::/64');
    expect(networkOf('2001:db8:a:b:c::1.2.3.4')).toBe('2001:db8:a:b::/64');
    expect(networkOf('[2001:db8:0:7::9]:443')).toBe('2001:db8:0:7::/64');
    expect(networkOf('fe80::1%eth0')).toBe('fe80:0:0:0::/64');
    expect(networkOf('::ffff:192.0.2.7')).toBe('192.0.2.7');
    expect(networkOf('192.0.2.7:4711')).toBe('192.0.2.7');
    expect(networkOf('192.0.2.7')).toBe('192.0.2.7');
    expect(networkOf('unknown')).toBe('unknown');
  });
});
