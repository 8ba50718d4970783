import { type AddressInfo, createServer } from 'node:net';

/** What the fault and multi-instance tests (test/ops) share. */

/**
 * Redis database 1, not 0: the rate-limit counters per client address outlive a test run, and these tests sign in
 * many times from 127.0.0.1, which would use up the per-address budget of the tests that count on database 0.
 */
export const OPS_REDIS_URL = new URL(
  '/1',
  process.env['TEST_REDIS_URL'] ?? 'redis://127.0.0.1:6379',
).toString();

/** Room for a loaded machine on top of a documented bound (argon2 hashing, scheduling). */
export const MARGIN_MS = 2000;

/** A sign-in through the session API of the auth surface at `base`. */
export const postSession = (base: string, username: string, password = `${username}-demo-password`) =>
  fetch(`${base}/api/sessions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ username, password }),
  });

/**
 * Whether the host at `base` reads every dependency up on `/ready`: `ready`, not `degraded` (both are 200, since Redis
 * down or writes refused leave the instance serving), the way to wait for Redis to be back.
 */
export const readyInFull = async (base: string): Promise<boolean> =>
  ((await (await fetch(`${base}/ready`)).json()) as { status: string }).status === 'ready';

/** Polls every 100 ms until `check` holds; returns the milliseconds it took, or -1 after `timeoutMs`. */
export async function within(check: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const started = Date.now();
  while (Date.now() - started < timeoutMs) {
    if (await check()) return Date.now() - started;
    await new Promise((r) => setTimeout(r, 100));
  }
  return -1;
}

/** `svc_dependency_up` of `dependency` as an instance's metrics listener (`METRICS_PORT`) reports it; NaN if absent. */
export async function dependencyUp(metricsUrl: string, dependency: string): Promise<number> {
  const text = await (await fetch(metricsUrl)).text();
  const line = text.split('\n').find((l) => l.startsWith(`svc_dependency_up{dependency="${dependency}"}`));
  return Number(line?.split(' ')[1]);
}

/** The log lines an instance wrote with this message. */
export const logged = (logs: { lines: Record<string, unknown>[] }, message: string) =>
  logs.lines.filter((l) => l['msg'] === message);

/** A loopback port free now, for a process that must be told its port (its output lost, or a pooler's config). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}
