/**
 * Whole-file writes: each file through a temporary beside it (`<file>.<pid>.tmp`), renamed over the
 * file once every temporary is written. A reader never sees half a file, and a failure (a full disk,
 * a folder in the way) leaves the previous files, or none, and none of our temporaries.
 *
 * One helper for every writer of files a later run or another process reads (the training exports,
 * `kais export --layers`, `--plot`, the agent's cache, the launcher's prediction file); each caller
 * turns an AtomicWriteError into its own message. Hand-written (a few lines) rather than
 * write-file-atomic: that writes one file, and the exports need several renamed together (never a
 * new .bin beside an old .json).
 */
import * as fs from 'fs';

/** A file-system failure of writeFilesAtomically: the file it was writing (not the temporary) and the code. */
export class AtomicWriteError extends Error {
  constructor(
    readonly file: string,
    readonly code: string,
    readonly fsError: NodeJS.ErrnoException,
  ) {
    super(`${file}: cannot write it (${code}: ${fsError.message.replace(/^[A-Z]+: /, '')})`);
    this.name = 'AtomicWriteError';
  }
}

export type AtomicFile = readonly [file: string, data: string | Uint8Array];

/** The temporary a file is written through (exported for tests that put something in its way). */
export function atomicTemp(file: string): string {
  return `${file}.${process.pid}.tmp`;
}

/**
 * Writes every [file, data], then renames them in order. `mode` is the new files' permission bits
 * (0o600 for private ones). A file-system failure is an AtomicWriteError; anything else is rethrown.
 */
export function writeFilesAtomically(files: readonly AtomicFile[], options: { mode?: number } = {}): void {
  const temps = files.map(([file]) => atomicTemp(file));
  let at = files[0]?.[0] ?? '';
  try {
    files.forEach(([file, data], i) => {
      at = file;
      fs.writeFileSync(temps[i], data, options.mode === undefined ? undefined : { mode: options.mode });
    });
    files.forEach(([file], i) => {
      at = file;
      fs.renameSync(temps[i], file);
    });
  } catch (e) {
    // our temporaries only: a folder of that name (the failure's cause, maybe) is left alone
    for (const t of temps) {
      try {
        if (fs.lstatSync(t, { throwIfNoEntry: false })?.isFile()) fs.rmSync(t, { force: true });
      } catch {
        // not removable either: the error below says what failed
      }
    }
    const err = e as NodeJS.ErrnoException;
    if (typeof err.code !== 'string' || !/^E[A-Z]+$/.test(err.code)) throw e; // not the file system's
    throw new AtomicWriteError(at, err.code, err);
  }
}

/** writeFilesAtomically for one file. */
export function writeFileAtomically(file: string, data: string | Uint8Array, options: { mode?: number } = {}): void {
  writeFilesAtomically([[file, data]], options);
}
