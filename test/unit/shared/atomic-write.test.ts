/**
 * shared/atomic-write.ts, the one whole-file writer (exports, --plot, the agent's cache, the
 * prediction file): the permission bits asked for, and a failure that names the file, not the temporary.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { AtomicWriteError, atomicTemp, writeFileAtomically } from '../../../shared/atomic-write';

describe('writeFileAtomically', () => {
  let dir: string;
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-atomic-one-'))));
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('replaces a file whole, with the mode asked for, and leaves nothing else', () => {
    const file = path.join(dir, 'p.json');
    fs.writeFileSync(file, 'old', { mode: 0o644 });
    writeFileAtomically(file, '{"new":true}', { mode: 0o600 });
    expect(fs.readFileSync(file, 'utf8')).toBe('{"new":true}');
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readdirSync(dir)).toEqual(['p.json']);
  });

  it('a file that cannot be written is an AtomicWriteError naming it and its code; the previous file is kept', () => {
    const file = path.join(dir, 'p.json');
    fs.writeFileSync(file, 'old');
    fs.mkdirSync(atomicTemp(file)); // a folder holds the temporary's name
    let err: unknown;
    try {
      writeFileAtomically(file, 'new');
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AtomicWriteError);
    expect((err as AtomicWriteError).file).toBe(file);
    expect((err as AtomicWriteError).code).toBe('EISDIR');
    expect((err as AtomicWriteError).message).toMatch(/p\.json: cannot write it \(EISDIR: /);
    expect(fs.readFileSync(file, 'utf8')).toBe('old');
    expect(fs.statSync(atomicTemp(file)).isDirectory()).toBe(true); // not ours: left alone
  });

  it('a file in a folder that does not exist fails with ENOENT, not a half-made folder', () => {
    const file = path.join(dir, 'missing', 'p.json');
    expect(() => writeFileAtomically(file, 'x')).toThrow(AtomicWriteError);
    expect(fs.readdirSync(dir)).toEqual([]);
  });
});
