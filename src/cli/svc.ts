import process from 'node:process';
import { applyV8Flags } from '../base/v8-flags.js';
import { main } from './main.js';

// Before anything runs: V8's heap settings of the service's process (base/v8-flags.ts).
applyV8Flags();
// `start` keeps the process alive through its servers; every other command ends here.
const code = await main(process.argv.slice(2));
if (code !== 0) process.exitCode = code;
