import { Writable } from 'node:stream';
import { pino } from 'pino';
import { expect, it } from 'vitest';
import { DeferredChildLogger } from '../../src/http/deferred-logger.js';

it('logs with the bindings at enabled levels only, and builds the child only when it logs', () => {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write: (c: Buffer, _e, done) => {
      lines.push(JSON.parse(c.toString()));
      done();
    },
  });
  const parent = pino({ level: 'info' }, stream);
  let children = 0;
  const child = parent.child.bind(parent);
  parent.child = ((...a: Parameters<typeof child>) => (children++, child(...a))) as typeof parent.child;
  const log = new DeferredChildLogger(parent, { request_id: 'req_1' }, {});
  log.debug('hidden');
  expect(children).toBe(0);
  log.info({ a: 1 }, 'shown');
  log.error('loud');
  expect(children).toBe(1);
  expect(lines.map((l) => [l['msg'], l['request_id'], l['level']])).toEqual([
    ['shown', 'req_1', 30],
    ['loud', 'req_1', 50],
  ]);
  expect(log.isLevelEnabled('debug')).toBe(false);
});
