import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import SQLite from 'better-sqlite3';
import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/store/database.js';
import { migrateTo, migrateToLatest } from '../../src/store/migrate.js';
import { embeddedFileExposure } from '../../src/store/embedded-file.js';
import { svc, useDatabaseForCli } from '../helpers/cli.js';
import { startTestServer } from '../helpers/harness.js';
import { freePort, postSession } from '../helpers/ops.js';

/**
 * Backups of the embedded database as an operator takes them: `svc backup` (the built command) beside a serving
 * instance (the built command too) that writes all the while, then `svc restore` and the service started again on it.
 * The embedded database whatever TEST_DATABASE says: PostgreSQL is backed up with its own tools.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const folders: string[] = [];
const children: ChildProcess[] = [];
afterAll(() => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL');
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

const folder = (): string => {
  const made = mkdtempSync(join(tmpdir(), 'svc-backup-'));
  folders.push(made);
  return made;
};

/** This build's migrations, in order. */
const MIGRATIONS = readdirSync(new URL('../../src/store/migrations/', import.meta.url))
  .filter((f) => f.endsWith('.ts'))
  .map((f) => f.replace(/\.ts$/, ''))
  .sort();
/** The newest migration of this build, which a copy of a database it migrated records. */
const NEWEST_MIGRATION = MIGRATIONS.at(-1);

/** The environment of a `svc` process on the embedded database in `dataDir`. */
function envOn(dataDir: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'development',
    LOG_LEVEL: 'warn',
    DATA_DIR: dataDir,
    API_PORT: '0',
    MCP_PORT: '0',
    AGENCY_MCP_PORT: '0',
    AUTH_PORT: '0',
    DCR_LIMIT_PER_IP: '100000',
  };
  delete env['DATABASE_URL'];
  delete env['BASE_URL'];
  return env;
}

/**
 * `svc start --only api,auth` over `dataDir` (seeding the demo when it is empty) on `ports`: its URLs once it listens,
 * and its stop. The same ports again are the same issuer and audiences, as a restored deployment's.
 */
async function serve(dataDir: string, ports: { api: number; auth: number }) {
  const child = spawn(process.execPath, [`${ROOT}bin/svc.js`, 'start', '--only', 'api,auth'], {
    env: { ...envOn(dataDir), API_PORT: String(ports.api), AUTH_PORT: String(ports.auth) },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  children.push(child);
  let banner = '';
  child.stderr!.on('data', (c: Buffer) => (banner += c.toString()));
  for (let i = 0; i < 300 && !/auth\s+http:\/\/\S+/.test(banner); i++)
    await new Promise((r) => setTimeout(r, 50));
  const url = (name: string) => new RegExp(`${name}\\s+(http://\\S+)`).exec(banner)?.[1] ?? '';
  if (!url('auth')) throw new Error(`svc start did not come up:\n${banner}`);
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    child.kill(signal);
    await exited;
  };
  return { api: url('api'), auth: url('auth'), stop };
}

/** `svc backup --to target` as its own process: exit code and output. */
const backupProcess = (dataDir: string, target: string) => svcProcess(dataDir, ['backup', '--to', target]);

/** `svc ...args` as its own process, beside the instances: exit code and output. */
function svcProcess(
  dataDir: string,
  args: string[],
): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [`${ROOT}bin/svc.js`, ...args], {
      env: envOn(dataDir),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
    child.on('exit', (code) => resolve({ code, out, err }));
  });
}

/** Client registrations one after another until `stop`: each one's status and id, in the order they were answered. */
function registrationsUntil(auth: string, stop: { now: boolean }) {
  const answered: { status: number; clientId: string }[] = [];
  const done = (async () => {
    for (let i = 0; !stop.now; i++) {
      const res = await fetch(`${auth}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ redirect_uris: ['http://127.0.0.1/callback'], client_name: `writer ${i}` }),
      });
      const body = (await res.json()) as { client_id?: string };
      answered.push({ status: res.status, clientId: body.client_id ?? '' });
    }
  })();
  return { answered, done };
}

/** Rows that make the database worth a second of copying: audit events, as a year of an agency's history. */
function fillWithHistory(dataDir: string, events: number): void {
  const db = new SQLite(join(dataDir, 'svc.sqlite'));
  db.pragma('busy_timeout = 5000');
  const insert = db.prepare(
    `INSERT INTO audit_events (id, type, agency_id, actor_user_id, member_id, connection_id, detail, created_at)
     VALUES (?, 'task.created', 'agy_backup', NULL, NULL, NULL, ?, ?)`,
  );
  db.transaction(() => {
    for (let i = 0; i < events; i++)
      insert.run(`evt_backup_${i}`, JSON.stringify({ title: 'x'.repeat(120) }), i);
  })();
  db.close();
}

describe('svc backup beside a serving instance', () => {
  it('copies one snapshot while the instance goes on writing; svc restore puts it back once the instance has stopped (crashed), and the service takes the tokens issued before it', async () => {
    const live = folder();
    const ports = { api: await freePort(), auth: await freePort() };
    const serving = await serve(live, ports);
    const session = (await (await postSession(serving.auth, 'ada')).json()) as { token: string };
    fillWithHistory(live, 150_000);

    const stop = { now: false };
    const writer = registrationsUntil(serving.auth, stop);
    while (writer.answered.length < 20) await new Promise((r) => setTimeout(r, 10));
    const answeredBefore = writer.answered.length;
    const target = join(folder(), 'svc-backup.sqlite');
    const made = await backupProcess(live, target);
    const answeredAfter = writer.answered.length;
    stop.now = true;
    await writer.done;

    expect(made.err).toBe('');
    expect(made.code).toBe(0);
    const line = JSON.parse(made.out) as Record<string, unknown>;
    expect(line).toMatchObject({ object: 'backup', file: target, migration: NEWEST_MIGRATION });
    expect(line['bytes']).toBe(statSync(target).size);
    // The instance wrote all the while: the copy neither stopped nor failed a write.
    expect(answeredAfter).toBeGreaterThan(answeredBefore);
    expect(writer.answered.every((a) => a.status === 201)).toBe(true);
    // It holds the signing keys: its owner's alone, and nothing left under the working name.
    expect(statSync(target).mode & 0o777).toBe(0o600);
    expect(existsSync(`${target}.partial`)).toBe(false);

    // One snapshot: the registrations answered before it began, then some of those made during it, in order.
    const copy = new SQLite(target, { readonly: true });
    const stored = new Set(
      copy.prepare("SELECT client_id FROM oauth_clients WHERE kind = 'dcr'").pluck().all() as string[],
    );
    expect(copy.pragma('integrity_check', { simple: true })).toBe('ok');
    expect(copy.prepare('SELECT count(*) FROM audit_events').pluck().get()).toBe(150_000);
    copy.close();
    const inCopy = writer.answered.map((a) => stored.has(a.clientId));
    const inSnapshot = inCopy.indexOf(false) === -1 ? inCopy.length : inCopy.indexOf(false);
    expect(inCopy.slice(inSnapshot).some(Boolean)).toBe(false);
    expect(inSnapshot).toBeGreaterThanOrEqual(answeredBefore);
    expect(inSnapshot).toBeLessThanOrEqual(answeredAfter);
    expect(stored.size).toBe(inSnapshot);

    // Restored with svc restore: refused while the instance has the database open, then done once it has stopped.
    const whileServing = await svcProcess(live, ['restore', '--from', target]);
    expect(whileServing.code).toBe(2);
    expect(whileServing.err).toContain('a process has');
    expect(readdirSync(live).filter((f) => f.includes('before-restore'))).toEqual([]);
    // Ended as a crash ends it: its log, holding the latest commits, left beside the database for the restore to fold in.
    await serving.stop('SIGKILL');
    expect(existsSync(join(live, 'svc.sqlite-wal'))).toBe(true);
    // A restore stopped partway before left its copy under the working name.
    writeFileSync(join(live, 'svc.sqlite.restoring'), 'half a copy');
    const restored = await svcProcess(live, ['restore', '--from', target]);
    expect(restored.err).toBe('');
    expect(restored.code).toBe(0);
    const put = JSON.parse(restored.out) as { file: string; kept: string; migration: string };
    expect(put).toMatchObject({ file: join(live, 'svc.sqlite'), migration: NEWEST_MIGRATION });
    expect(statSync(put.file).mode & 0o777).toBe(0o600);
    expect(existsSync(join(live, 'svc.sqlite.restoring'))).toBe(false);
    // What it replaced is kept whole beside it, its log checkpointed in (read before anything opens it, since a
    // read-only connection makes a log of its own): every registration answered, those after the snapshot included.
    expect(readdirSync(live).filter((f) => f.startsWith(`${basename(put.kept)}-`))).toEqual([]);
    const dcrIn = (file: string) => {
      const db = new SQLite(file, { readonly: true });
      const count = db.prepare("SELECT count(*) FROM oauth_clients WHERE kind = 'dcr'").pluck().get();
      db.close();
      return count;
    };
    expect(dcrIn(put.kept)).toBe(writer.answered.length);
    expect(dcrIn(put.file)).toBe(inSnapshot);
    const again = await serve(live, ports);
    const me = await fetch(`${again.api}/me`, { headers: { authorization: `Bearer ${session.token}` } });
    expect(me.status).toBe(200);
    expect(((await me.json()) as { username: string }).username).toBe('ada');
    await again.stop();
  }, 60_000);
});

describe('svc backup refusals', () => {
  const saved = { ...process.env };
  afterAll(() => {
    process.env = saved;
  });

  it('never replaces a file, needs an existing folder, names PostgreSQL’s tools, never migrates, and creates no database where none is', async () => {
    const dataDir = folder();
    const store = openStore({ dataDir, databaseUrl: undefined, databasePoolSize: 1 });
    await store.close();
    useDatabaseForCli({ DATA_DIR: dataDir, DATABASE_URL: '' });

    const existing = join(folder(), 'kept.sqlite');
    copyFileSync(join(dataDir, 'svc.sqlite'), existing);
    const before = readFileSync(existing);
    const replaced = await svc('backup', '--to', existing);
    expect(replaced.code).toBe(2);
    expect(replaced.err).toContain('never replaces a file');
    expect(readFileSync(existing).equals(before)).toBe(true);

    const nowhere = await svc('backup', '--to', join(dataDir, 'missing', 'b.sqlite'));
    expect(nowhere.code).toBe(2);
    expect(nowhere.err).toContain('is not a folder');

    useDatabaseForCli({ DATA_DIR: dataDir, DATABASE_URL: 'postgres://svc@127.0.0.1:5432/svc' });
    const postgres = await svc('backup', '--to', join(folder(), 'b.sqlite'));
    expect(postgres.code).toBe(2);
    expect(postgres.err).toContain('pg_dump');

    const restoredFromPostgres = await svc('restore', '--from', existing);
    expect(restoredFromPostgres.code).toBe(2);
    expect(restoredFromPostgres.err).toContain('pg_restore');

    useDatabaseForCli({ DATA_DIR: dataDir, DATABASE_URL: '' });
    const notABackup = join(folder(), 'notes.txt');
    writeFileSync(notABackup, 'not a database');
    const refusedRestore = await svc('restore', '--from', notABackup);
    expect(refusedRestore.code).toBe(2);
    expect(refusedRestore.err).toContain('is not a sound database');
    expect(readdirSync(dataDir).filter((f) => f.includes('before-restore'))).toEqual([]);

    // Taken before a release's migrations, with the new build: the copy and the database keep the schema they had.
    const older = folder();
    const olderStore = openStore({ dataDir: older, databaseUrl: undefined, databasePoolSize: 1 });
    await migrateTo(olderStore.db, MIGRATIONS.at(-2)!);
    await olderStore.close();
    useDatabaseForCli({ DATA_DIR: older, DATABASE_URL: '' });
    const beforeRelease = await svc('backup', '--to', join(folder(), 'before-release.sqlite'));
    expect(beforeRelease.code).toBe(0);
    expect((JSON.parse(beforeRelease.out) as { migration: string }).migration).toBe(MIGRATIONS.at(-2));
    const live = new SQLite(join(older, 'svc.sqlite'), { readonly: true });
    expect(live.prepare('SELECT max(name) FROM kysely_migration').pluck().get()).toBe(MIGRATIONS.at(-2));
    live.close();

    const empty = join(folder(), 'never-used');
    useDatabaseForCli({ DATA_DIR: empty, DATABASE_URL: '' });
    const none = await svc('backup', '--to', join(folder(), 'b.sqlite'));
    expect(none.code).toBe(2);
    expect(none.err).toContain('no embedded database');
    expect(existsSync(empty)).toBe(false);
  });
});

describe('svc backup on a full disk', () => {
  // A file system of its own to fill: a 1 MiB tmpfs, which only root may mount (CI runs as root).
  it.skipIf(process.getuid?.() !== 0)(
    'fails naming both files, and leaves nothing on the disk it filled',
    async () => {
      const dataDir = folder();
      const store = openStore({ dataDir, databaseUrl: undefined, databasePoolSize: 1 });
      await migrateToLatest(store.db);
      await store.close();
      fillWithHistory(dataDir, 20_000);
      const small = folder();
      execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', small]);
      try {
        const target = join(small, 'b.sqlite');
        const made = await backupProcess(dataDir, target);
        expect(made.code).toBe(1);
        expect(made.err.trim()).toBe(
          `svc: the backup of ${join(dataDir, 'svc.sqlite')} to ${target} failed: database or disk is full ` +
            '(SQLITE_FULL); nothing was kept',
        );
        expect(readdirSync(small)).toEqual([]);
      } finally {
        execFileSync('umount', [small]);
      }
    },
  );
});

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
