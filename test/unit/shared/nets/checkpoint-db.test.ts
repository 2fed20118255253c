/**
 * shared/nets/checkpoint-db.ts: a checkpoint file damaged where no checksum of ours looks (an older
 * checkpoint's weight pages overwritten) is refused in one line before a resume writes more into it;
 * a truncated one is refused without leaving a new -wal / -shm beside it; a zero-byte one opened to
 * write starts fresh with one line saying so.
 */
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { CheckpointDb, checkScenario, scenarioFingerprint } from '../../../../shared/nets/checkpoint-db';
import { loadScenario } from '../../../../shared/scenario';
import { UsageError } from '../../../../shared/errors';
import { tmpDir } from '../../../support/tmp';

describe('CheckpointDb', () => {
  const dir = tmpDir('kais-ckdb-');

  it('refuses a file whose pages were overwritten, for reading and for a resume, and leaves it as it was', () => {
    const file = path.join(dir, 'run.db');
    const db = CheckpointDb.open(file, 'create');
    db.writeConfig({ scenario: 'tiny' });
    // several checkpoints of large weights: the older ones' blobs are overflow pages in the middle
    // of the file, which the row counts at open never read (only the latest is checksummed on load)
    for (let episode = 0; episode < 6; episode++) {
      const big = Float32Array.from({ length: 20_000 }, (_, i) => episode + i / 20_000);
      db.writeCheckpoint(
        {
          episode,
          frame: episode + 1,
          actor: [big],
          critic: [big],
          actorShapes: [[big.length]],
          criticShapes: [[big.length]],
          adam: [],
          adamShapes: [],
          state: { weightVersion: 0, actorAdamStep: 0, criticAdamStep: 0, rng: {} },
        } as never,
        [{ frame: episode + 1, json: { rate: 0.5 } }],
      );
    }
    db.close();
    // a sound file opens
    CheckpointDb.open(file, 'read').close();
    const size = fs.statSync(file).size;
    const fd = fs.openSync(file, 'r+');
    fs.writeSync(fd, crypto.randomBytes(3000), 0, 3000, Math.floor(size * 0.3));
    fs.closeSync(fd);
    const before = crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex');
    for (const mode of ['read', 'create'] as const) {
      expect(() => CheckpointDb.open(file, mode)).toThrow(UsageError);
      expect(() => CheckpointDb.open(file, mode)).toThrow(
        /run\.db: not a usable kais checkpoint \(a damaged database \(SQLite quick_check: /,
      );
    }
    expect(crypto.createHash('sha256').update(fs.readFileSync(file)).digest('hex')).toBe(before);
  });

  it('starts a zero-byte file fresh for writing, with one line naming it, and refuses it for reading', () => {
    const sub = fs.mkdtempSync(path.join(dir, 'empty-'));
    const file = path.join(sub, 'run.db');
    fs.writeFileSync(file, '');
    const lines: string[] = [];
    expect(() => CheckpointDb.open(file, 'read', (line) => lines.push(line))).toThrow(UsageError);
    expect(lines).toEqual([]);
    const db = CheckpointDb.open(file, 'create', (line) => lines.push(line));
    expect(db.config()).toBeNull();
    db.writeConfig({ scenario: 'tiny' });
    db.close();
    expect(lines).toEqual([`${file} is empty (0 bytes): starting a fresh run`]);
    // written once, it is resumed without a line
    CheckpointDb.open(file, 'create', (line) => lines.push(line)).close();
    expect(lines).toHaveLength(1);
    expect(fs.readdirSync(sub)).toEqual(['run.db']);
  });

  it('refuses a truncated file (a WAL one too) and leaves no -wal / -shm of its own beside it', () => {
    const sub = fs.mkdtempSync(path.join(dir, 'trunc-'));
    const file = path.join(sub, 'run.db');
    const db = CheckpointDb.open(file, 'create');
    db.writeConfig({ scenario: 'tiny', pad: 'x'.repeat(20_000) });
    db.close();
    // a file in WAL mode (as an orchestrator store passed by mistake is): SQLite makes a -wal and -shm when it opens it
    const raw = new Database(file);
    raw.pragma('journal_mode = WAL');
    raw.close();
    fs.truncateSync(file, 8192);
    const before = fs.readFileSync(file);
    for (const mode of ['read', 'create'] as const) {
      expect(() => CheckpointDb.open(file, mode)).toThrow(/run\.db: not a usable kais checkpoint/);
      expect(fs.readdirSync(sub)).toEqual(['run.db']);
    }
    expect(fs.readFileSync(file).equals(before)).toBe(true);
  });
});

describe('checkScenario: what the line says when the scenario differs', () => {
  const tiny = loadScenario('tiny');
  const small = loadScenario('small');
  it('a built-in of another name, and another version of the same name', () => {
    expect(() => checkScenario('run.db', { scenario: 'small', scenarioFingerprint: scenarioFingerprint(small) }, tiny)).toThrow(
      /^run\.db: trained on scenario "small", not "tiny"$/,
    );
    expect(() => checkScenario('run.db', { scenario: 'tiny', scenarioFingerprint: 'x' }, tiny)).toThrow(
      /^run\.db: trained on a different version of scenario "tiny" \(fingerprint x\)$/,
    );
  });
  it('a scenario file (stored by its path): the file was edited since, or another was given', () => {
    expect(() => checkScenario('run.db', { scenario: '/tmp/sc/mine.json', scenarioFingerprint: 'x' }, tiny)).toThrow(
      /^run\.db: trained on the scenario file \/tmp\/sc\/mine\.json as it was then \(fingerprint x\); the scenario given now \("tiny"\) is not that one/,
    );
  });
  it('the same scenario passes', () => {
    expect(() => checkScenario('run.db', { scenario: 'tiny', scenarioFingerprint: scenarioFingerprint(tiny) }, tiny)).not.toThrow();
  });
});
