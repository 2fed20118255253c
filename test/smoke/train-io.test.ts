/**
 * `kais train` and its files on the `tiny` scenario through the real CLI (dist/kais.js): a full
 * disk is one line and exit 1 (the last complete checkpoint kept, no empty file left), episodes are
 * capped in length (their memory grows with it), and a run's files are stored as absolute paths so
 * that it resumes from any directory.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Database from 'better-sqlite3';
import { loadScenario } from '../../shared/scenario';
import { expectUsageExit, KAIS, runKais, type KaisRun } from '../support/cli';
import { fullDiskWritePreload } from '../support/full-disk';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-train-io-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/**
 * A preload: SQLite files whose name holds "full-disk" hold at most KAIS_TEST_PAGES pages of 4 KiB
 * (SQLite's max_page_count; a write beyond fails with SQLITE_FULL, "database or disk is full", as
 * on a full disk).
 */
const preload = path.join(tmp, 'full-disk.js');
fs.writeFileSync(
  preload,
  [
    `const Database = require(${JSON.stringify(require.resolve('better-sqlite3'))});`,
    'const pragma = Database.prototype.pragma;',
    'Database.prototype.pragma = function (src, ...rest) {',
    '  const r = pragma.call(this, src, ...rest);',
    "  if (/quick_check/.test(src) && this.name.includes('full-disk')) pragma.call(this, `max_page_count = ${process.env.KAIS_TEST_PAGES}`);",
    '  return r;',
    '};',
  ].join('\n') + '\n',
);

function kaisWith(opts: { pages?: number; cwd?: string }, ...args: string[]): KaisRun {
  const r = spawnSync(process.execPath, [...(opts.pages ? ['-r', preload] : []), KAIS, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    cwd: opts.cwd,
    env: { ...process.env, KAIS_TEST_PAGES: String(opts.pages ?? 0) },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

const run = ['train', '--scenario', 'tiny', '--curriculum', 'none', '--episode-frames', '1', '--frames', '3', '--eval-every', '0'];
const kaisLines = (r: KaisRun) => r.stderr.split('\n').filter((l) => l.startsWith('kais:'));

describe('kais train on a full disk: one line, exit 1, no stack', () => {
  it('with no room for the file at all: nothing left behind', () => {
    const out = path.join(tmp, 'full-disk-start.db');
    const r = kaisWith({ pages: 1 }, ...run, '--out', out);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([`kais: --out ${out}: disk full while writing its first pages (no file is left behind)`]);
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('full-disk-start'))).toEqual([]);
  });

  it('before the first checkpoint: the file this run made is removed', () => {
    const out = path.join(tmp, 'full-disk-first.db');
    const r = kaisWith({ pages: 100 }, ...run, '--out', out);
    expect(r.code).toBe(1);
    expect(kaisLines(r)).toEqual([
      `kais: --out ${out}: disk full while writing the checkpoint of episode 0 (no checkpoint was written: the file is removed)`,
    ]);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    expect(fs.readdirSync(tmp).filter((f) => f.startsWith('full-disk-first'))).toEqual([]);
  });

  it('mid-run: the last complete checkpoint is kept, and --resume goes on from it once there is room', () => {
    const out = path.join(tmp, 'full-disk-mid.db');
    const r = kaisWith({ pages: 400 }, ...run, '--out', out);
    expect(r.code).toBe(1);
    expect(kaisLines(r)).toEqual([
      `kais: --out ${out}: disk full while writing the checkpoint of episode 1 (the last complete checkpoint, frame 1, is kept: --resume continues from it once there is room)`,
    ]);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    const resumed = runKais([...run, '--out', out, '--resume']);
    expect(resumed.code).toBe(0);
    expect(resumed.stdout).toMatch(/trained 3 frames/);
  });
});

describe('kais train --episode-frames', () => {
  it('is capped at 50 frames (an episode is held in memory whole): exit 2, one line, nothing written', () => {
    const out = path.join(tmp, 'long.db');
    const r = runKais([
      'train',
      '--scenario',
      'tiny',
      '--curriculum',
      'none',
      '--episode-frames',
      '100000',
      '--frames',
      '100000',
      '--out',
      out,
    ]);
    expectUsageExit(r, /--episode-frames.*50/, out);
  });
});

describe("a run's files are stored as absolute paths", () => {
  it('resumes (and plots) from another directory a run started with a relative --scenario file', () => {
    const a = path.join(tmp, 'a');
    const b = path.join(tmp, 'b');
    fs.mkdirSync(a);
    fs.mkdirSync(b);
    fs.writeFileSync(path.join(a, 'sc.json'), JSON.stringify(loadScenario('tiny')));
    const args = ['train', '--curriculum', 'none', '--episode-frames', '1', '--eval-every', '0'];
    expect(kaisWith({ cwd: a }, ...args, '--scenario', 'sc.json', '--frames', '1', '--out', 'run.db').code).toBe(0);
    const db = new Database(path.join(a, 'run.db'), { readonly: true });
    const config = JSON.parse((db.prepare("SELECT value FROM meta WHERE key = 'config'").get() as { value: string }).value) as {
      scenario: string;
    };
    db.close();
    expect(config.scenario).toBe(path.join(a, 'sc.json'));
    // the learning curve reads the stored scenario: from b, "sc.json" would not be found
    const r = kaisWith(
      { cwd: b },
      ...args,
      '--scenario',
      '../a/sc.json',
      '--frames',
      '2',
      '--resume',
      '--out',
      path.join(a, 'run.db'),
      '--plot',
      'curve.svg',
    );
    expect(r.stderr).not.toMatch(/^kais:/m);
    expect(r.code).toBe(0);
    expect(fs.existsSync(path.join(b, 'curve.svg'))).toBe(true);
  });
});

describe('kais train --plot on a full disk: the summary first, then one line and exit 1, no part of the plot', () => {
  it('prints the summary, then says the plot could not be written', () => {
    // the disk is full for files whose name holds "full-disk." (half the bytes land, then ENOSPC)
    const probe = fullDiskWritePreload(tmp);
    const dir = fs.mkdtempSync(path.join(tmp, 'plot-'));
    const plot = path.join(dir, 'full-disk.svg');
    const out = path.join(tmp, 'plot-run.db');
    const r = spawnSync(process.execPath, ['-r', probe, KAIS, ...run, '--out', out, '--plot', plot, '--json'], {
      encoding: 'utf8',
      timeout: 120_000,
    });
    expect(r.status).toBe(1);
    expect(JSON.parse(r.stdout)).toHaveProperty('frames', 3);
    expect(kaisLines({ code: r.status, stdout: r.stdout, stderr: r.stderr })).toEqual([`kais: --plot: cannot write ${plot}: ENOSPC`]);
    expect(fs.readdirSync(dir)).toEqual([]);
    expect(fs.existsSync(out)).toBe(true); // the training is kept
  }, 120_000);
});
