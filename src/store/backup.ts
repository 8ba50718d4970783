import { closeSync, existsSync, fsyncSync, linkSync, lstatSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { embeddedFilePath } from './embedded-file.js';

/**
 * A backup of the embedded database while instances serve and write (docs/deployment.md#backups).
 *
 * `VACUUM INTO` copies the database as one read transaction sees it: a consistent snapshot, which writers in WAL mode
 * do not wait for and cannot restart. SQLite's online backup (`sqlite3 svc.sqlite ".backup …"`, what the docs said
 * before) starts again whenever another connection writes, and against a service writing every 5 ms it had copied
 * 12 MB of a 290 MB database when it was stopped after 40 s; `VACUUM INTO` took 1.2 s.
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

/** A backup this command will not make, and why (a usage error: nothing was written). */
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
