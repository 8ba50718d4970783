import { afterAll, beforeAll, vi } from 'vitest';
import { main } from '../../src/cli/main.js';
import { startTestServer, type TestServer } from './harness.js';

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

/**
 * A test server started before the file's tests, its database the CLI's, the way an operator runs `svc` beside a
 * serving instance; closed, and the environment restored, after them.
 */
export function serverForCli(): { readonly server: TestServer } {
  const serving = {} as { server: TestServer };
  const saved = { ...process.env };
  beforeAll(async () => {
    serving.server = await startTestServer();
    useDatabaseForCli(serving.server.database);
  });
  afterAll(async () => {
    process.env = saved;
    await serving.server?.close();
  });
  return serving;
}
