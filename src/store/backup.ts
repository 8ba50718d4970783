import {
  chmodSync,
  closeSync,
  constants,
  copyFileSync,
  existsSync,
  fsyncSync,
  linkSync,
  lstatSync,
  openSync,
  renameSync,
  rmSync,
  statSync,
} from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { embeddedFilePath, makeDataDir } from './embedded-file.js';

/**
 * A backup of the embedded database while instances serve and write, and its restore (docs/deployment.md#backups).
 *
 * `VACUUM INTO` copies the database as one read transaction sees it: a consistent snapshot, which writers in WAL mode
 * do not wait for and cannot restart. SQLite's online backup (`sqlite3 svc.sqlite ".backup …"`, what the docs said
 * before) starts again whenever another connection writes, and against a service writing every 5 ms it had copied
 * 12 MB of a 290 MB database when it was stopped after 40 s; `VACUUM INTO` took 1.2 s, the whole backup 1.7.
 *
 * The copy is made under a name of its own beside the target, with mode 0600 from its creation (it holds the signing
 * keys: embedded-file.ts), checked by SQLite (`quick_check`), synced (SQLite does not sync what `VACUUM INTO` writes),
 * then linked to the target's name, which fails rather than replace a file there, and the folder synced. A backup
 * that fails leaves nothing under either name. The source is opened read-only and never migrated: a backup taken
 * before a release's migrations is the schema the release before it runs.
 */
export interface Backup {
  file: string;
  bytes: number;
  /** The newest migration applied in the copy: the build that runs it as it is (docs/deployment.md). */
  migration: string | null;
}

/** A backup or restore these commands will not do, and why (a usage error: nothing was written or changed). */
export class BackupRefused extends Error {
  override name = 'BackupRefused';
}

export function backupEmbeddedDatabase(dataDir: string, target: string, lockWaitMs: number): Backup {
  const source = embeddedFilePath(dataDir);
  if (!existsSync(source))
    throw new BackupRefused(`no embedded database at ${source} (DATA_DIR): nothing to back up`);
  const file = resolve(target);
  refuseTarget(file);
  const partial = `${file}.partial`;
  try {
    closeSync(openSync(partial, 'wx', 0o600));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST')
      throw new BackupRefused(
        `${partial} exists: a backup to ${file} is under way or stopped partway; remove it`,
      );
    throw e;
  }
  try {
    copySnapshot(source, partial, lockWaitMs);
    const migration = checkCopy(partial);
    syncFile(partial, 'r+');
    try {
      linkSync(partial, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') refuseTarget(file);
      throw e;
    }
    syncFile(dirname(file), 'r');
    return { file, bytes: statSync(file).size, migration };
  } catch (e) {
    throw e instanceof BackupRefused ? e : new BackupFailed(source, file, e);
  } finally {
    // The copy's own rollback journal, which SQLite leaves when VACUUM INTO fails (a full disk), goes with it.
    for (const leftover of [partial, `${partial}-journal`]) rmSync(leftover, { force: true });
  }
}

/**
 * A backup that could not be made, named by both files: SQLite's message alone ("database or disk is full") reads as
 * the database's own trouble, where it is most often the target's disk.
 */
export class BackupFailed extends Error {
  override name = 'BackupFailed';
  constructor(source: string, file: string, cause: unknown) {
    const code = (cause as { code?: unknown }).code;
    const why = `${cause instanceof Error ? cause.message : String(cause)}${typeof code === 'string' ? ` (${code})` : ''}`;
    super(`the backup of ${source} to ${file} failed: ${why}; nothing was kept`, { cause });
  }
}

/** The target must name a new file in an existing folder: a backup never replaces a file. */
function refuseTarget(file: string): void {
  if (lstatSafe(file))
    throw new BackupRefused(`${file} exists: svc backup never replaces a file; name a new one`);
  const folder = lstatSafe(dirname(file));
  if (!folder?.isDirectory()) throw new BackupRefused(`${dirname(file)} is not a folder: name a file in one`);
}

const lstatSafe = (path: string) => {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
};

/** One read transaction of a read-only connection, written into the empty file `into`. */
function copySnapshot(source: string, into: string, lockWaitMs: number): void {
  const db = new SQLite(source, { readonly: true, fileMustExist: true, timeout: lockWaitMs });
  try {
    db.prepare('VACUUM INTO ?').run(into);
  } finally {
    db.close();
  }
}

/** SQLite's check of the copy's pages and indexes; the newest migration it records. */
function checkCopy(file: string): string | null {
  const db = new SQLite(file, { readonly: true, fileMustExist: true });
  try {
    const check = db.pragma('quick_check', { simple: true });
    if (check !== 'ok')
      throw new Error(`the copy failed SQLite's quick_check (${String(check)}); nothing was kept`);
    const hasMigrations = db
      .prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'kysely_migration'")
      .get();
    if (!hasMigrations) return null;
    const newest = db.prepare('SELECT max(name) FROM kysely_migration').pluck().get();
    return typeof newest === 'string' ? newest : null;
  } finally {
    db.close();
  }
}

function syncFile(path: string, flags: 'r' | 'r+'): void {
  const fd = openSync(path, flags);
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** What `svc restore` put in place, and where the database it replaced was kept. */
export interface Restore {
  file: string;
  from: string;
  /** The database as it was before, whole (its log checkpointed into it), or null where there was none. */
  kept: string | null;
  migration: string | null;
}

/**
 * Restores a backup (docs/deployment.md#backups): the database file replaced by a checked copy of `from`, once no
 * process has it open, the database it replaces kept beside it under `svc.sqlite.before-restore-<time>`.
 *
 * Whether a process has it open: every connection to a database in WAL mode holds a shared lock on its file for as
 * long as it is open, so an exclusive lock asked for without waiting (`locking_mode = EXCLUSIVE`, `BEGIN EXCLUSIVE`)
 * is refused while an instance or a `svc` command is on it. Closed, that connection checkpoints the log into the file
 * it keeps aside, which is then whole by itself. A database whose first page SQLite cannot read (the damage a restore
 * is often for) cannot be asked, and no process can be serving from it: it is kept aside as it is, log and all.
 *
 * The copy is made beside the database (mode 0600), synced, then renamed into place and the folder synced: a restore
 * stopped partway leaves either the old file in place or the new one, never half of one.
 */
export function restoreEmbeddedDatabase(dataDir: string, from: string, now: Date): Restore {
  const backup = resolve(from);
  if (!lstatSafe(backup)?.isFile()) throw new BackupRefused(`${backup} is not a file`);
  const migration = checkBackup(backup);
  makeDataDir(dataDir);
  const file = embeddedFilePath(dataDir);
  const kept = existsSync(file) ? keepAside(file, now) : null;
  const partial = `${file}.restoring`;
  // Left by a restore stopped partway (nothing opens this name): its copy is started again.
  rmSync(partial, { force: true });
  try {
    copyFileSync(backup, partial, constants.COPYFILE_EXCL);
    chmodSync(partial, 0o600);
    syncFile(partial, 'r+');
    renameSync(partial, file);
    syncFile(dataDir, 'r');
  } finally {
    rmSync(partial, { force: true });
  }
  return { file, from: backup, kept, migration };
}

/** A backup must be a sound SQLite file that holds this service's schema. */
function checkBackup(backup: string): string {
  let migration: string | null;
  try {
    migration = checkCopy(backup);
  } catch (e) {
    throw new BackupRefused(
      `${backup} is not a sound database: ${(e as Error).message}; nothing was changed`,
    );
  }
  if (migration === null) throw new BackupRefused(`${backup} holds no svc database; nothing was changed`);
  return migration;
}

/** Moves the database (and its log and shared memory, if left) aside, once no process has it open. */
function keepAside(file: string, now: Date): string {
  // Folded into the file, the log is gone, and the shared memory of the processes that used it (left by a crash) is
  // only their index of that log.
  if (checkpointAlone(file)) rmSync(`${file}-shm`, { force: true });
  const kept = `${file}.before-restore-${now.toISOString().replace(/[:.]/g, '-')}`;
  for (const suffix of ['-wal', '-shm', '']) {
    if (existsSync(file + suffix)) renameSync(file + suffix, kept + suffix);
  }
  return kept;
}

/**
 * Refuses (BackupRefused) while another process has `file` open; otherwise closes it alone, which checkpoints its log
 * into it, and says so. A file SQLite cannot open or lock for another reason is left as it is (false).
 */
function checkpointAlone(file: string): boolean {
  let db: SQLite.Database;
  try {
    db = new SQLite(file, { fileMustExist: true, timeout: 0 });
  } catch {
    return false;
  }
  try {
    db.pragma('locking_mode = EXCLUSIVE');
    db.exec('BEGIN EXCLUSIVE');
    db.exec('COMMIT');
  } catch (e) {
    db.close();
    if (String((e as { code?: unknown }).code).startsWith('SQLITE_BUSY'))
      throw new BackupRefused(
        `a process has ${file} open (an instance, or a svc command): stop every process on DATA_DIR first; ` +
          'nothing was changed',
      );
    return false;
  }
  db.close();
  return true;
}
