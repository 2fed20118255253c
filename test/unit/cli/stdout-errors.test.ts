/**
 * A standard output that cannot be written: `> /dev/full` is one line and exit 1 (it was an
 * unhandled 'error' event's stack, or exit 7 from tfjs-wasm's rethrow); a reader that went away
 * (`| head`) is exit 0, quietly.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { KAIS } from '../../support/cli';
import { tmpDir } from '../../support/tmp';

const EVAL = ['eval', '--scenario', 'tiny', '--policies', 'lec/hpa', '--frames', '1', '--json'];

(fs.existsSync('/dev/full') ? describe : describe.skip)('kais with a standard output that cannot be written', () => {
  it.each([
    ['eval', EVAL],
    [
      'train',
      [
        'train',
        '--scenario',
        'tiny',
        '--curriculum',
        'none',
        '--frames',
        '1',
        '--out',
        path.join(tmpDir('kais-stdout-'), 't.db'),
        '--json',
      ],
    ],
  ])('%s > /dev/full: one line, exit 1', (_name, args) => {
    const out = fs.openSync('/dev/full', 'w');
    try {
      const r = spawnSync(process.execPath, [KAIS, ...args], { stdio: ['ignore', out, 'pipe'], encoding: 'utf8', timeout: 60_000 });
      expect(r.status).toBe(1);
      // the last line says it (train's progress lines come before), and no stack
      expect(r.stderr.trim().split('\n').at(-1)).toBe('kais: cannot write to standard output (ENOSPC)');
      expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
    } finally {
      fs.closeSync(out);
    }
  });
});

describe('kais with a reader that goes away', () => {
  it('eval --json | (reader closes at once): exit 0, nothing on stderr', async () => {
    const child = spawn(process.execPath, [KAIS, ...EVAL], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.destroy(); // the reader is gone before the first byte
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    expect(code).toBe(0);
    expect(stderr).not.toMatch(/internal error|Error:|at /);
  });
});
