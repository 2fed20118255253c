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
