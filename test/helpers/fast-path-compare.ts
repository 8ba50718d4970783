import { expect } from 'vitest';
import type { TestServer } from './harness.js';

/**
 * What a fast path test compares between a server with the fast path and one without: the access log line of a
 * request and the counters of the metrics listener.
 */

/** The access log line of one request, without what varies by nature (times, pid, request id). */
export function accessLine(server: TestServer, requestId: string) {
  const line = server.logs.lines.find((l) => l['request_id'] === requestId && l['msg'] === 'request');
  expect(line).toBeDefined();
  const { time: _t, pid: _p, hostname: _h, ms: _ms, request_id: _id, ...rest } = line!;
  return rest;
}

/** The counters named by `names` (histograms left out: their buckets depend on timing), by series. */
export async function counters(server: TestServer, names: RegExp): Promise<Map<string, number>> {
  const text = await (await fetch(server.services.metricsUrl!)).text();
  const lines = text.split('\n').filter((l) => names.test(l));
  return new Map(lines.map((l) => [l.slice(0, l.lastIndexOf(' ')), Number(l.slice(l.lastIndexOf(' ') + 1))]));
}

/** The series that changed between two readings of `counters`, with their change. */
export const delta = (before: Map<string, number>, after: Map<string, number>) =>
  Object.fromEntries([...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)]).filter(([, d]) => d !== 0));

export type Side = 'fast' | 'slow';

/** The same request to the server with the fast path, then to the one without: both answers and counters' change. */
export async function sendToBoth<R>(
  servers: Record<Side, TestServer>,
  names: RegExp,
  send: (side: Side) => Promise<R>,
) {
  const read = (side: Side) => counters(servers[side], names);
  const before = { fast: await read('fast'), slow: await read('slow') };
  const a = await send('fast');
  const b = await send('slow');
  return {
    a,
    b,
    fastCounted: delta(before.fast, await read('fast')),
    slowCounted: delta(before.slow, await read('slow')),
  };
}
