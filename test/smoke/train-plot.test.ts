import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import { tmpDir } from '../support/tmp';

const KAIS = path.resolve(__dirname, '../../dist/kais.js');

describe('kais train --plot', () => {
  const dir = tmpDir('kais-lc-');

  it('draws the learning curve next to jsq/hpa and lec/hpa', () => {
    const plot = path.join(dir, 'curve.svg');
    const r = spawnSync(
      process.execPath,
      [
        KAIS,
        'train',
        '--scenario',
        'tiny',
        '--frames',
        '2',
        '--bc-frames',
        '1',
        '--episode-frames',
        '1',
        '--eval-every',
        '2',
        '--out',
        path.join(dir, 't.db'),
        '--plot',
        plot,
      ],
      { encoding: 'utf8', timeout: 120000 },
    );
    expect(r.status).toBe(0);
    const svg = fs.readFileSync(plot, 'utf8');
    for (const name of ['cmmac (training)', 'cmmac (held-out eval)', 'jsq/hpa', 'lec/hpa']) expect(svg).toContain(name);
    expect(svg).not.toContain('NaN');
    // every series is a rate of at most 1 (the per-frame in-time share, not completions per arrival), so is the y axis
    const yLabels = [...svg.matchAll(/text-anchor="end">([\d.]+)</g)].map((m) => Number(m[1]));
    expect(Math.max(...yLabels)).toBe(1);
  });

  it('refuses a plot file that is neither .svg nor .png, before training', () => {
    const r = spawnSync(
      process.execPath,
      [KAIS, 'train', '--scenario', 'tiny', '--frames', '1', '--out', path.join(dir, 'u.db'), '--plot', path.join(dir, 'x.pdf')],
      {
        encoding: 'utf8',
        timeout: 60000,
      },
    );
    expect(r.status).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(fs.existsSync(path.join(dir, 'u.db'))).toBe(false);
  });
});
