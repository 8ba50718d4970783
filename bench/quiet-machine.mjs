// Waits, before a run, until nothing else on the machine keeps its cores busy. The 21:35 run of 2026-11-28 started as
// a session's set-up (`npm ci`, package installs, a build) ended, and read bare `node:http` at 41.2 CPU µs per request
// against 22–35 in other runs on that machine; its agency MCP and p99 figures missed where the same scenarios met them
// minutes later. CPU time per operation moves much less than req/s with other load, but not nothing: the cores'
// caches and clocks are shared.
import { existsSync, readFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';

/** The share of every core's time, over a window, that something other than idling took. */
const BUSY_LIMIT = 0.15;
const WINDOW_MS = 1_000;
/** Windows in a row under the limit before the run starts. */
const QUIET_WINDOWS = 3;

/** Busy and total jiffies of every core together, from /proc/stat's `cpu` line (idle and iowait count as idle). */
function cpuTimes() {
  const fields = readFileSync('/proc/stat', 'utf8')
    .split('\n', 1)[0]
    .trim()
    .split(/\s+/)
    .slice(1)
    .map(Number);
  const total = fields.slice(0, 8).reduce((a, b) => a + b, 0); // user … steal; guest time is inside user
  const idle = fields[3] + fields[4];
  return { busy: total - idle, total };
}

async function busyShare() {
  const before = cpuTimes();
  await sleep(WINDOW_MS);
  const after = cpuTimes();
  const total = after.total - before.total;
  return total > 0 ? (after.busy - before.busy) / total : 0;
}

/**
 * Resolves once the machine has been quiet (under BUSY_LIMIT of its cores busy) for QUIET_WINDOWS windows in a row,
 * or after `maxSeconds`; says what it found either way. Without /proc/stat (not Linux), it does not wait.
 */
export async function waitForQuietMachine(maxSeconds) {
  if (!existsSync('/proc/stat') || maxSeconds <= 0) {
    return { waitedSeconds: 0, settled: undefined, note: 'did not check that the machine was quiet' };
  }
  const start = Date.now();
  let quiet = 0;
  let highest = 0;
  let last = 0;
  while (quiet < QUIET_WINDOWS) {
    last = await busyShare();
    highest = Math.max(highest, last);
    quiet = last < BUSY_LIMIT ? quiet + 1 : 0;
    if (quiet < QUIET_WINDOWS && (Date.now() - start) / 1000 >= maxSeconds) {
      const waitedSeconds = Math.round((Date.now() - start) / 1000);
      return {
        waitedSeconds,
        settled: false,
        note:
          `the machine stayed busy (${percent(last)} of its ${cpus().length} cores in the last second) for ` +
          `${waitedSeconds} s: measuring anyway, the figures may be disturbed`,
      };
    }
  }
  const waitedSeconds = Math.round((Date.now() - start) / 1000);
  const waited = waitedSeconds > QUIET_WINDOWS * (WINDOW_MS / 1000) + 1;
  return {
    waitedSeconds,
    settled: true,
    note: waited
      ? `waited ${waitedSeconds} s for the machine to be quiet (up to ${percent(highest)} of its cores busy)`
      : `the machine was quiet (under ${percent(BUSY_LIMIT)} of its cores busy)`,
  };
}

const percent = (share) => `${Math.round(share * 100)} %`;
