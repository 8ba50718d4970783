import { closeSync, mkdirSync, openSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Where the embedded database lives, and who may read it. The file holds every password hash, every session and
 * connection, and the private keys that sign every token (docs/security.md): whoever can read it can sign tokens
 * the service accepts. So a DATA_DIR this process creates is its owner's alone (0700), and so is a database file it
 * creates (0600), its `-wal` and `-shm` too (SQLite gives them the database file's mode). Files and folders that an
 * operator made are left as they are: `embeddedFileExposure` says what they let others read, for the start-up log.
 */
export const embeddedFilePath = (dataDir: string): string => join(dataDir, 'svc.sqlite');

/** Why DATA_DIR could not be made, by Node's code. */
const DATA_DIR_PROBLEMS: Record<string, string> = {
  EEXIST: 'a file is in the way',
  ENOTDIR: 'a file is in the way',
  EACCES: 'this process may not create it',
  EPERM: 'this process may not create it',
  EROFS: 'its file system is read-only',
};

/**
 * DATA_DIR and its database file, each made readable by this user alone when it does not exist yet (an empty file is
 * an empty SQLite database). Returns the file's path.
 */
export function prepareEmbeddedFile(dataDir: string): string {
  makeDataDir(dataDir);
  const file = embeddedFilePath(dataDir);
  try {
    // `wx`: created here, or left alone if it exists (SQLite's own default would be 0644, readable by every user).
    closeSync(openSync(file, 'wx', 0o600));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw cannotHold(dataDir, e);
  }
  return file;
}

/** DATA_DIR, made readable by this user alone if it does not exist yet. */
export function makeDataDir(dataDir: string): void {
  try {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw cannotHold(dataDir, e);
  }
}

/** Node's message names the path but not the setting (`EEXIST: file already exists, mkdir '/srv/svc'`). */
function cannotHold(dataDir: string, e: unknown): Error {
  const code = (e as NodeJS.ErrnoException).code ?? '';
  const problem = DATA_DIR_PROBLEMS[code];
  return new Error(
    `DATA_DIR ${dataDir} cannot hold the embedded database: ${problem ? `${problem} (${code})` : (e as Error).message}`,
  );
}

/**
 * Whom besides its owner the database file lets read it, where DATA_DIR lets them reach it (its search bit): a
 * sentence for the start-up log, or undefined. Folders above DATA_DIR are not looked at.
 */
export function embeddedFileExposure(dataDir: string): string | undefined {
  const file = embeddedFilePath(dataDir);
  let fileMode: number;
  let dirMode: number;
  try {
    fileMode = statSync(file).mode;
    dirMode = statSync(dataDir).mode;
  } catch {
    return undefined;
  }
  const readers = [
    fileMode & 0o040 && dirMode & 0o010 ? 'its group' : '',
    fileMode & 0o004 && dirMode & 0o001 ? 'every user of this machine' : '',
  ].filter(Boolean);
  if (readers.length === 0) return undefined;
  const mode = (fileMode & 0o777).toString(8).padStart(4, '0');
  return (
    `the embedded database ${file} is readable by ${readers.join(' and ')} (mode ${mode}): it holds the password ` +
    `hashes and the private signing keys; chmod 700 ${dataDir} (or chmod 600 the database and its -wal and -shm)`
  );
}
