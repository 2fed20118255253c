/**
 * orchestrator/store.ts at open: a zero-byte `--db` starts fresh with one log line saying so; a
 * truncated one is refused and leaves no new `-wal` / `-shm` beside it (companions that were there
 * before stay).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { Store, StoreError } from '../../../orchestrator/store';
import { tmpDir } from '../../support/tmp';

/** A closed store file with some rows (more than 8 KiB of them), alone in `dir`. */
function filledStore(dir: string): string {
  const file = path.join(dir, 'orchestrator.db');
  const s = Store.open(file, { log: () => undefined });
  for (let i = 0; i < 50; i++) s.recordEvent({ kind: 'test', eap: null, session: null, message: `event ${i}`.repeat(40) });
  s.close();
  return file;
}

/** Cut to its first 8 KiB: the header is sound, the pages are not. */
const cut = (file: string) => fs.truncateSync(file, 8192);

describe('Store open of an empty or truncated file', () => {
  it('starts fresh on a zero-byte file with one line naming it, and says nothing when reopening it', () => {
    const dir = tmpDir('kais-store-empty-');
    const file = path.join(dir, 'orchestrator.db');
    fs.writeFileSync(file, '');
    const lines: string[] = [];
    const s = Store.open(file, { log: (line) => lines.push(line) });
    expect(s.createdNow).toBe(true);
    expect(s.latestModel()).toBeNull();
    s.close();
    expect(lines).toEqual([`${file} is empty (0 bytes): starting a fresh store`]);
    // the file is a store now: a restart resumes it without a line
    Store.open(file, { log: (line) => lines.push(line) }).close();
    expect(lines).toHaveLength(1);
    // a new file (no file at all) is not an empty one
    Store.open(path.join(dir, 'new.db'), { log: (line) => lines.push(line) }).close();
    expect(lines).toHaveLength(1);
  });

  it('refuses a truncated file and leaves only that file in its folder', () => {
    const dir = tmpDir('kais-store-trunc-');
    const file = filledStore(dir);
    cut(file);
    const before = fs.readFileSync(file);
    expect(fs.readdirSync(dir)).toEqual(['orchestrator.db']);
    for (const readonly of [false, true]) {
      expect(() => Store.open(file, { readonly })).toThrow(StoreError);
      expect(fs.readdirSync(dir)).toEqual(['orchestrator.db']);
    }
    expect(fs.readFileSync(file).equals(before)).toBe(true);
  });

  it('keeps the -wal / -shm that were there before a refused open', () => {
    const dir = tmpDir('kais-store-keep-');
    const file = filledStore(dir);
    // held open by another connection (as by another process): its -wal and -shm are beside the file
    const other = new Database(file);
    try {
      other.prepare('SELECT count(*) FROM meta').get();
      expect(fs.readdirSync(dir).sort()).toEqual(['orchestrator.db', 'orchestrator.db-shm', 'orchestrator.db-wal']);
      // then cut under it
      cut(file);
      expect(() => Store.open(file)).toThrow(StoreError);
      expect(fs.readdirSync(dir).sort()).toEqual(['orchestrator.db', 'orchestrator.db-shm', 'orchestrator.db-wal']);
    } finally {
      other.close();
    }
  });
});
