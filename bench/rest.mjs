// REST API: GET /health and GET /me (session token, embedded database) beside a bare node:http JSON endpoint.
// The bare endpoint is measured twice: as it is, and receiving the very request /me receives (with its ~700-byte
// bearer token), so the ratio compares the work of answering the same bytes.
import { measure, printTable, sessionToken, spawnServer, startSvc } from './lib.mjs';

const BARE = 'bare node:http JSON (baseline)';
const BARE_SAME = 'bare node:http JSON, same request as /me';

export async function run({ seconds = 5 } = {}) {
  const svc = await startSvc();
  const rows = [];
  try {
    const headers = { authorization: `Bearer ${await sessionToken(svc.urls.auth)}` };
    const bare = await spawnServer(['bench/bare-server.mjs'], { ready: /bare (http:\/\/\S+)/ });
    try {
      rows.push(await measure(BARE, { url: bare.match[1], pid: bare.pid, seconds }));
      rows.push(await measure(BARE_SAME, { url: `${bare.match[1]}/me`, pid: bare.pid, headers, seconds }));
    } finally {
      await bare.stop();
    }
    rows.push(await measure('GET /health', { url: `${svc.urls.api}/health`, pid: svc.pid, seconds }));
    rows.push(
      await measure('GET /me (session token)', { url: `${svc.urls.api}/me`, pid: svc.pid, headers, seconds }),
    );
  } finally {
    await svc.stop();
  }
  printTable('REST API, 50 connections', rows, BARE);
  const [bare, same, , me] = rows;
  const ratio = (base, key) =>
    base[key] && me[key]
      ? (key === 'cpuUsPerReq' ? base[key] / me[key] : me[key] / base[key]).toFixed(2)
      : 'n/a';
  console.log(
    `ratio /me ÷ bare = ${ratio(same, 'reqPerSec')} by req/s, ${ratio(same, 'cpuUsPerReq')} by CPU per request for the same request ` +
      `(${ratio(bare, 'reqPerSec')} and ${ratio(bare, 'cpuUsPerReq')} against bare without the token); target ≥ 0.6. ` +
      `/me p99 = ${me.p99} ms (target ≤ 5)`,
  );
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
