import { lookup } from 'node:dns/promises';
import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { isDependencyOutage } from '../../src/http/dependency-outage.js';
import { freePort } from '../helpers/ops.js';

/** The error a connection to `port` on loopback ends with. */
function connectError(port: number): Promise<unknown> {
  return new Promise((resolve) => connect(port, '127.0.0.1').on('error', resolve));
}

describe('a dependency that cannot be reached is an outage (503), not a bug (500)', () => {
  it('as Node reports it here: a closed port, a name that does not exist', async () => {
    expect(isDependencyOutage(await connectError(await freePort()))).toBe(true);
    expect(isDependencyOutage(await lookup('postgres.invalid').catch((e: unknown) => e))).toBe(true);
  });

  it("as Node reports what the host's network does: a resolver failing for now, no route, no port or descriptor left", () => {
    // The codes Node gives these, with the syscall that met them (a pool opening a connection).
    for (const [code, syscall] of [
      ['EAI_AGAIN', 'getaddrinfo'],
      ['ENETUNREACH', 'connect'],
      ['ENETDOWN', 'connect'],
      ['EADDRNOTAVAIL', 'connect'],
      ['ECONNABORTED', 'read'],
      ['EMFILE', 'socket'],
      ['ENFILE', 'socket'],
    ]) {
      const error = Object.assign(new Error(`${syscall} ${code}`), { code, syscall });
      expect(isDependencyOutage(error), code).toBe(true);
    }
  });

  it('a bug stays a bug', () => {
    expect(isDependencyOutage(new TypeError("Cannot read properties of undefined (reading 'id')"))).toBe(
      false,
    );
    expect(isDependencyOutage(Object.assign(new Error('bad'), { code: 'ERR_INVALID_ARG_TYPE' }))).toBe(false);
  });
});
