/**
 * A full disk for a child process, without a small file system: a preload (`node -r <file>`) under
 * which fs.writeFileSync of a file whose name holds "full-disk." writes half its bytes and then
 * fails with ENOSPC, as a disk that fills mid-write does. Used by the tests of --plot (kais eval,
 * kais train): what is left behind, and what the user is told.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Writes the preload into `dir` and returns its path. */
export function fullDiskWritePreload(dir: string): string {
  const file = path.join(dir, 'full-disk-preload.js');
  fs.writeFileSync(
    file,
    [
      "const fs = require('fs');",
      'const real = fs.writeFileSync;',
      'fs.writeFileSync = function (file, data, ...rest) {',
      "  if (typeof file !== 'string' || !file.includes('full-disk.')) return real.call(fs, file, data, ...rest);",
      "  const b = typeof data === 'string' ? Buffer.from(data) : data;",
      '  real.call(fs, file, b.subarray(0, b.length >> 1));',
      "  throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });",
      '};',
    ].join('\n') + '\n',
  );
  return file;
}
