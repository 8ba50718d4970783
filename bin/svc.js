#!/usr/bin/env node
// Launcher for the compiled CLI; `npm ci` builds it (the `prepare` script), `npm start` rebuilds what changed.
import { existsSync } from 'node:fs';

const entry = new URL('../dist/cli/svc.js', import.meta.url);
if (!existsSync(entry)) {
  console.error('svc: not built yet; run `npm run build` (npm ci and npm start do it for you)');
  process.exit(1);
}
await import(entry.href);
