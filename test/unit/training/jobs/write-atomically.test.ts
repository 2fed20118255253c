/**
 * writeFilesAtomically (kais train --export-actor / --export-gpg): all files or none, no temporary
 * left behind, and a file-system failure as one line naming the file (EXPORT_WRITE_FAILED).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { atomicTemp } from '../../../../shared/atomic-write';
import { UsageError } from '../../../../shared/errors';
import { EXPORT_WRITE_FAILED, writeFilesAtomically } from '../../../../training/jobs/train-checkpoint';

describe('writeFilesAtomically', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-atomic-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('writes every file, and on a failure keeps the previous ones, removes its temporaries and leaves a folder in the way alone', () => {
    const bin = path.join(dir, 'a.bin');
    const json = `${bin}.json`;
    writeFilesAtomically([
      [json, '{"v":1}\n'],
      [bin, Uint8Array.from([1, 2, 3])],
    ]);
    expect([fs.readFileSync(json, 'utf8'), [...fs.readFileSync(bin)]]).toEqual(['{"v":1}\n', [1, 2, 3]]);
    fs.mkdirSync(atomicTemp(bin)); // the second temporary cannot be written
    let err: unknown;
    try {
      writeFilesAtomically([
        [json, '{"v":2}\n'],
        [bin, Uint8Array.from([9])],
      ]);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UsageError);
    expect((err as UsageError).code).toBe(EXPORT_WRITE_FAILED);
    expect((err as UsageError).message).toMatch(/a\.bin: cannot write it \(EISDIR: /);
    expect([fs.readFileSync(json, 'utf8'), [...fs.readFileSync(bin)]]).toEqual(['{"v":1}\n', [1, 2, 3]]); // the previous pair
    expect(fs.existsSync(atomicTemp(json))).toBe(false);
    expect(fs.statSync(atomicTemp(bin)).isDirectory()).toBe(true);
  });
});
