// PostgreSQL for the benchmarks: a throwaway schema per server, seeded through the CLI, and one admin connection
// that finds the backends serving a side (by application_name) so that their CPU is charged to it.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { usePgAdmin } from './lib.mjs';

export const PG_URL =
  process.env.BENCH_DATABASE_URL ??
  process.env.TEST_DATABASE_URL ??
  'postgres://postgres@127.0.0.1:5432/test';

let admin;
/** Connects the admin client once; false when PostgreSQL is not reachable (its sides are then skipped). */
export async function pgReady() {
  if (admin) return true;
  try {
    const c = new pg.Client({ connectionString: PG_URL, application_name: 'svc-bench-admin' });
    await c.connect();
    admin = c;
    usePgAdmin(c);
    return true;
  } catch {
    console.log(`PostgreSQL at ${PG_URL} is not reachable; its sides are skipped`);
    return false;
  }
}

export async function pgEnd() {
  await admin?.end();
  admin = undefined;
}

/**
 * A fresh schema; `seed` runs `svc seed-demo` in it (which migrates first). The URL carries the search_path and a
 * unique application_name, which is how the bench finds the backends of this side.
 */
export async function pgSchema({ seed = true } = {}) {
  const id = randomBytes(5).toString('hex');
  const schema = `bench_${id}`;
  const app = `svc-bench-${id}`;
  await admin.query(`CREATE SCHEMA ${schema}`);
  const url = new URL(PG_URL);
  url.searchParams.set('options', `-c search_path=${schema}`);
  url.searchParams.set('application_name', app);
  if (seed) {
    await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ['bin/svc.js', 'seed-demo'], {
        env: { ...process.env, DATABASE_URL: url.toString(), LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      });
      child.on('exit', (code) =>
        code === 0 ? resolve() : reject(new Error(`seed-demo exited with ${code}`)),
      );
    });
  }
  return {
    schema,
    app,
    url: url.toString(),
    drop: () => admin.query(`DROP SCHEMA ${schema} CASCADE`),
  };
}
