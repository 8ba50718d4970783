import { vi } from 'vitest';
import { main } from '../../src/cli/main.js';

/** Points the CLI at `database` (the environment of a test database or server): it reads the real environment. */
export function useDatabaseForCli(database: Record<string, string>): void {
  // Vitest exports Vite's BASE_URL ("/") into the environment; the CLI would read it as the setting.
  delete process.env['BASE_URL'];
  Object.assign(process.env, database, { NODE_ENV: 'test', LOG_LEVEL: 'warn' });
}

/** Runs `svc ...args` in-process and captures what it prints. */
export async function svc(...args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  vi.spyOn(console, 'log').mockImplementation((...a) => void out.push(a.join(' ')));
  vi.spyOn(console, 'error').mockImplementation((...a) => void err.push(a.join(' ')));
  const code = await main(args);
  vi.restoreAllMocks();
  return { code, out: out.join('\n'), err: err.join('\n') };
}
