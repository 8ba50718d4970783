import process from 'node:process';
import { main } from './main.js';

// `start` keeps the process alive through its servers; every other command ends here.
const code = await main(process.argv.slice(2));
if (code !== 0) process.exitCode = code;
