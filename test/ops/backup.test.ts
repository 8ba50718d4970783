import { chmodSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/database.js';
import { embeddedFileExposure } from '../../src/store/embedded-file.js';
import { startTestServer } from '../helpers/harness.js';

/** The embedded database's file at rest: who may read it. */

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

const folder = (): string => {
  const made = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  folders.push(made);
  return made;
};

describe('the embedded database at rest', () => {
  it('is made readable by its owner alone, and the start-up log names a database that others can read', async () => {
    const parent = folder();
    const dataDir = join(parent, 'data');
    const store = openStore({ dataDir, databaseUrl: undefined, databasePoolSize: 1 });
    await sql`CREATE TABLE written (n integer)`.execute(store.db);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    for (const file of ['svc.sqlite', 'svc.sqlite-wal', 'svc.sqlite-shm'])
      expect(statSync(join(dataDir, file)).mode & 0o777, file).toBe(0o600);
    await store.close();
    expect(embeddedFileExposure(dataDir)).toBeUndefined();

    // As SQLite made it before, in a folder that every user may enter.
    chmodSync(join(dataDir, 'svc.sqlite'), 0o644);
    chmodSync(dataDir, 0o755);
    const exposure = embeddedFileExposure(dataDir);
    expect(exposure).toContain('every user of this machine');
    expect(exposure).toContain('mode 0644');
    const server = await startTestServer({ env: { DATA_DIR: dataDir, DATABASE_URL: '' }, seed: false });
    try {
      const warned = server.logs.lines.filter((l) => l['level'] === 40 && l['msg'] === exposure);
      expect(warned).toHaveLength(1);
    } finally {
      await server.close();
    }
    // A folder only its owner may enter keeps the file from the others, whatever the file's own mode.
    chmodSync(dataDir, 0o700);
    expect(embeddedFileExposure(dataDir)).toBeUndefined();
  });
});
