/**
 * Temporary folders a test file removes when it ends. Importing this module registers one afterAll
 * in the importing test file (jest gives each test file its own module registry), so tmpDir() may be
 * called anywhere: at the top of the file, in a helper or inside a test.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';

const made: string[] = [];

afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A new empty folder under the OS temp folder, named prefix + random suffix, removed after the file's tests. */
export function tmpDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}

/** A test file's per-test folder (`dir`, new for each test) and the cleanups to run after each test. */
export interface PerTestDir {
  readonly dir: string;
  /** Run after each test, last pushed first, before `dir` is removed (servers to close, timers to clear). */
  readonly cleanups: (() => unknown)[];
}

/**
 * Registers a beforeEach that makes a new folder named prefix + random suffix and an afterEach that
 * awaits the cleanups in reverse order, then removes the folder. Call it at the top of a test file;
 * read `dir` inside tests (it changes with every test).
 */
export function perTestDir(prefix: string): PerTestDir {
  let dir: string | null = null;
  const cleanups: (() => unknown)[] = [];
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    if (dir !== null) fs.rmSync(dir, { recursive: true, force: true });
    dir = null;
  });
  return {
    get dir(): string {
      if (dir === null) throw new Error('perTestDir: dir is only set inside a test');
      return dir;
    },
    cleanups,
  };
}
