import process from 'node:process';
import { main } from './main.js';

// A reader that leaves early (`svc clients list | head -3`) closes the pipe under the command's output: the write then
// fails with EPIPE, which ended the process with an uncaught error and its stack on stderr. What it printed was for
// that reader alone, so the rest is dropped quietly; the command's work is done, and its exit code stands. (`start`
// logs through its own destination, http/log-output.ts, which counts what it loses.)
process.stdout.on('error', (e: NodeJS.ErrnoException) => {
  if (e.code !== 'EPIPE') throw e;
});

// `start` keeps the process alive through its servers; every other command ends here.
const code = await main(process.argv.slice(2));
if (code !== 0) process.exitCode = code;
