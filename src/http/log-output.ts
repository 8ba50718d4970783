import { writeSync } from 'node:fs';
import process from 'node:process';
import type { FastifyBaseLogger } from 'fastify';
import { type LoggerOptions, pino } from 'pino';
import sonicBoom from 'sonic-boom';
import { atMostEvery, type Clock } from '../base/clock.js';

// sonic-boom's types declare an ES module whose default export is the class; the package is CommonJS, and what Node
// hands an `import` of it is module.exports, the class itself.
const SonicBoom = sonicBoom as unknown as typeof sonicBoom.SonicBoom;

/** How often at most the log says how many lines it dropped while stdout took none. */
export const DROP_REPORT_INTERVAL_MS = 10_000;
/** How long an exiting process tries to hand stdout the lines it still holds. */
export const EXIT_FLUSH_MS = 2_000;

/**
 * The exit flush of every log output of the process, run by one `exit` listener: a process that makes several (a
 * test file's services, the CLI's commands run in one process) added a listener each, past Node's warning at 11.
 */
const atExit = new Set<() => void>();
process.once('exit', () => {
  for (const flush of atExit) flush();
});

/**
 * The process's logger, writing JSON lines to stdout asynchronously and holding at most `maxBufferBytes` of lines that
 * stdout has not taken (LOG_BUFFER_BYTES).
 *
 * Why: a log collector that stops reading — a container runtime's logging driver that hangs, a `| tee` onto a full
 * disk — leaves the pipe full. pino's default destination then kept every later line in memory (the access log is a few
 * hundred bytes per request: 73,217 requests against a full pipe, +39 MB) until the process ran out of it, and at exit
 * retried the write every 100 ms for ever: a SIGTERM never ended the process, nor did the shutdown timeout's exit.
 * Now serving goes on, the lines past the bound are dropped and counted, and once stdout takes lines again the log says
 * how many were lost (`log output stalled: lines dropped`, at most once every DROP_REPORT_INTERVAL_MS); at exit the
 * held lines get EXIT_FLUSH_MS, then the process ends without them.
 *
 * A write that fails outright is another matter: EPIPE (the collector's end of the pipe closed: it crashed, a `| head`
 * ended), EIO (the terminal hung up), ENOSPC (stdout a file on a full disk). pino's destination silenced EPIPE
 * uncounted, and any other code was an uncaught error that ended the process; and its exit flush, sonic-boom 4's, met
 * such an error by trying again every 100 ms for ever: a terminal closed as the process stopped left it running, the
 * line it had just logged not yet known to have failed. Now the first failure ends the output for the process's life,
 * counted: every later line is dropped and counted in the same count, and one line on stderr says what happened (a pipe
 * whose reader is gone never reads again; a process that logs nothing while it serves is better than one that stopped
 * serving; trying again later would mean a failing write per line while nothing reads). The destination is sonic-boom
 * 5's own, made here: its exit flush throws what it cannot write, and only a full pipe is tried again.
 */
export function boundedLogger(
  options: LoggerOptions,
  maxBufferBytes: number,
  clock: Clock,
): FastifyBaseLogger {
  let flushUntil = Number.POSITIVE_INFINITY;
  atExit.add(() => {
    flushUntil = clock.monotonic() + EXIT_FLUSH_MS;
    try {
      out.flushSync();
    } catch {
      // stdout took nothing within the bound, or failed: what it holds is lost, as it would be on SIGKILL.
    }
    out.destroy();
  });
  const out = new SonicBoom({
    fd: 1,
    sync: false,
    maxLength: maxBufferBytes,
    // A full pipe: try again later (every 100 ms), but at exit only until EXIT_FLUSH_MS has passed.
    retryEAGAIN: () => clock.monotonic() < flushUntil,
  });
  const log = pino(options, out);
  let dropped = 0;
  let reported = 0;
  const due = atMostEvery(DROP_REPORT_INTERVAL_MS, clock);
  out.on('drop', () => dropped++);
  // A write that stdout took: it reads again.
  out.on('write', () => {
    if (dropped === reported || !due()) return;
    const lines = dropped - reported;
    reported = dropped;
    // Not from inside the stream's own write callback.
    setImmediate(() =>
      log.warn({ dropped_lines: lines, buffer_bytes: maxBufferBytes }, 'log output stalled: lines dropped'),
    );
  });
  out.on('error', (e: NodeJS.ErrnoException) => {
    if (out.write === dropLine) return;
    out.write = dropLine;
    reportOutputFailure(options, clock, e);
  });
  function dropLine(): boolean {
    dropped++;
    return true;
  }
  droppedLines.set(log, () => dropped);
  return log;
}

/**
 * One line on stderr, in the log's shape, written at once: stdout will take no more, and stderr may be gone as well
 * (`2>&1` into the same pipe), where the line is lost too and nothing else is.
 */
function reportOutputFailure(options: LoggerOptions, clock: Clock, e: NodeJS.ErrnoException): void {
  const line = {
    level: 50,
    time: clock.now(),
    ...options.base,
    code: e.code,
    msg: 'log output failed: stdout takes no more lines; every later line is dropped and counted',
  };
  try {
    writeSync(2, `${JSON.stringify(line)}\n`);
  } catch {
    // stderr is gone too.
  }
}

const droppedLines = new WeakMap<FastifyBaseLogger, () => number>();

/**
 * The lines a logger made by `boundedLogger` has dropped since it was made (svc_log_lines_dropped_total); undefined for
 * any other logger (a test's), which drops nothing.
 */
export function droppedLogLines(log: FastifyBaseLogger): (() => number) | undefined {
  return droppedLines.get(log);
}
