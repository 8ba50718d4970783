// REST API: GET /health and GET /me (session token, embedded database) beside a bare node:http JSON endpoint.
import { measure, printTable, sessionToken, spawnServer, startSvc } from './lib.mjs';

export async function run({ seconds = 5 } = {}) {
  const bare = await spawnServer(['bench/bare-server.mjs'], { ready: /bare (http:\/\/\S+)/ });
  const rows = [];
  try {
    rows.push(
      await measure('bare node:http JSON (baseline)', { url: bare.match[1], pid: bare.pid, seconds }),
    );
  } finally {
    await bare.stop();
  }
  const svc = await startSvc();
  try {
    const token = await sessionToken(svc.urls.auth);
    rows.push(await measure('GET /health', { url: `${svc.urls.api}/health`, pid: svc.pid, seconds }));
    rows.push(
      await measure('GET /me (session token)', {
        url: `${svc.urls.api}/me`,
        pid: svc.pid,
        headers: { authorization: `Bearer ${token}` },
        seconds,
      }),
    );
  } finally {
    await svc.stop();
  }
  printTable('REST API, 50 connections', rows, 'bare node:http JSON (baseline)');
  const me = rows[2];
  const cpu =
    rows[0].cpuUsPerReq && me.cpuUsPerReq ? (rows[0].cpuUsPerReq / me.cpuUsPerReq).toFixed(2) : 'n/a';
  console.log(
    `ratio /me ÷ bare = ${(me.reqPerSec / rows[0].reqPerSec).toFixed(2)} by req/s, ${cpu} by CPU per request (target ≥ 0.6); /me p99 = ${me.p99} ms (target ≤ 5)`,
  );
  return rows;
}

if (import.meta.url === `file://${process.argv[1]}`) await run();
