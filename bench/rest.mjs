// REST API: GET /health and GET /me (session token, embedded database) beside a bare node:http JSON endpoint, in
// the same run. The bare endpoint is measured twice: as it is, and receiving the very request /me receives (with its
// ~700-byte bearer token), so the ratio compares the work of answering the same bytes.
// Target: /me ≥ 0.8× bare node:http by CPU per request (bare CPU ÷ /me CPU). /me is also measured with its fast path
// off (src/api/me-fast-path.ts), on a second service, and with Prometheus metrics on (METRICS_PORT), on a third.
import {
  compare,
  httpSide,
  note,
  pairedRatio,
  pairedReading,
  sessionToken,
  spawnServer,
  startSvc,
  times,
  verdict,
} from './lib.mjs';

const BARE = 'bare node:http JSON';
const BARE_SAME = 'bare node:http JSON, same request as /me (baseline)';
const ME = 'GET /me (session token)';
const ME_SLOW = 'GET /me (session token), REST_FAST_PATH=off';
const ME_METRICS = 'GET /me (session token), METRICS_PORT set';

export async function run() {
  const svc = await startSvc();
  // The same service with /me's fast path off, so that the lever stays measured in every run. It also serves
  // /health: both go through Fastify, while the fast /me has a process to itself. Sides sharing a process charge each
  // other the JIT's work at every switch (V8 deoptimised node:http's internals when /health followed the fast /me,
  // and /health measured 27 → 38 µs in the process that had served it).
  const slow = await startSvc({ env: { REST_FAST_PATH: 'off' } });
  // Metrics cost a counter and a histogram observation per request, and a cache counter per lookup.
  const counted = await startSvc({ env: { METRICS_PORT: '0' } });
  const bare = await spawnServer(['bench/bare-server.mjs'], { ready: /bare (http:\/\/\S+)/ });
  try {
    const headers = { authorization: `Bearer ${await sessionToken(svc.urls.auth)}` };
    const slowHeaders = { authorization: `Bearer ${await sessionToken(slow.urls.auth)}` };
    const countedHeaders = { authorization: `Bearer ${await sessionToken(counted.urls.auth)}` };
    const [bareSide, bareSame, health, me, meSlow, meMetrics] = [
      httpSide(BARE, { url: bare.match[1], pid: bare.pid }),
      httpSide(BARE_SAME, { url: `${bare.match[1]}/me`, pid: bare.pid, headers }),
      httpSide('GET /health', { url: `${slow.urls.api}/health`, pid: slow.pid }),
      httpSide(ME, { url: `${svc.urls.api}/me`, pid: svc.pid, headers }),
      httpSide(ME_SLOW, { url: `${slow.urls.api}/me`, pid: slow.pid, headers: slowHeaders }),
      httpSide(ME_METRICS, { url: `${counted.urls.api}/me`, pid: counted.pid, headers: countedHeaders }),
    ];
    // The target's two sides are measured back to back in every round, and its verdict is their paired ratio.
    const t = await compare('REST API, 50 connections', [bareSide, bareSame, health, me, meSlow, meMetrics], {
      baseline: BARE_SAME,
      order: [bareSide, bareSame, me, health, meSlow, meMetrics],
    });
    const same = pairedRatio(t[ME], t[BARE_SAME]);
    verdict(
      '/me ÷ bare node:http (same request) by CPU per request',
      `${times(same.ratio, 0.8)} (${pairedReading(same, t[BARE_SAME].cpuUs / t[ME].cpuUs)})`,
      same.ratio >= 0.8,
      '≥ 0.8×',
    );
    const plain = t[BARE].cpuUs / t[ME].cpuUs;
    note(`/me ÷ bare node:http without the token: ${plain.toFixed(2)}× by CPU per request`);
    const [on, off] = [t[ME_METRICS], t[ME]];
    note(
      `Prometheus metrics (METRICS_PORT set): GET /me ${on.cpuUs} against ${off.cpuUs} CPU µs without ` +
        `(${(on.cpuUs - off.cpuUs).toFixed(1)} apart; rounds spread ${on.cpuMin}–${on.cpuMax} and ` +
        `${off.cpuMin}–${off.cpuMax}: a difference inside that spread is noise)`,
    );
    return t;
  } finally {
    await bare.stop();
    await slow.stop();
    await counted.stop();
    await svc.stop();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
