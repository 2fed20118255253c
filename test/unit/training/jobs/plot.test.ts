import * as fs from 'fs';
import * as path from 'path';
import { isPlotWriteError, renderScatter, renderSvg, seriesStyle, writeSvg } from '../../../../training/jobs/plot';
import { tmpDir } from '../../../support/tmp';

// fs.writeFileSync as a jest.fn that writes for real unless a test makes it fail (a full disk, below):
// the modules see their own copy of `fs`'s properties, so the function is replaced in the module itself
jest.mock('fs', () => {
  const real = jest.requireActual<typeof import('fs')>('fs');
  return { ...real, writeFileSync: jest.fn(real.writeFileSync) };
});

/** The stroke colour and dash pattern of each polyline, in order. */
function lineStyles(svg: string): string[] {
  return [...svg.matchAll(/<polyline fill="none" stroke="([^"]+)" stroke-width="2"(?: stroke-dasharray="([^"]+)")?/g)].map(
    (m) => `${m[1]} ${m[2] ?? ''}`,
  );
}

describe('plot styles', () => {
  it('gives each of 80 series its own colour and dash pattern', () => {
    const styles = Array.from({ length: 80 }, (_, k) => seriesStyle(k));
    expect(new Set(styles.map((s) => `${s.color} ${s.dash}`)).size).toBe(80);
    // the first 20 are solid and all differ in colour
    expect(new Set(styles.slice(0, 20).map((s) => s.color)).size).toBe(20);
    expect(styles.slice(0, 20).every((s) => s.dash === '')).toBe(true);
  });

  it('draws 13 series of a line chart in 13 colours, and 30 in 30 different styles', () => {
    const series = (n: number) => Array.from({ length: n }, (_, k) => ({ name: `p${k}`, values: [0.5, 0.6] }));
    const s13 = lineStyles(renderSvg('t', series(13)));
    expect(s13).toHaveLength(13);
    expect(new Set(s13.map((s) => s.split(' ')[0])).size).toBe(13);
    const s30 = lineStyles(renderSvg('t', series(30)));
    expect(new Set(s30).size).toBe(30);
  });

  it('keeps a dashed series dashed (learning-curve baselines)', () => {
    expect(
      lineStyles(
        renderSvg('t', [
          { name: 'a', values: [1] },
          { name: 'b', values: [1], dashed: true },
        ]),
      ),
    ).toEqual(['#1f77b4 ', '#d62728 6 4']);
  });

  it('draws 25 scatter points in 25 different markers', () => {
    const svg = renderScatter(
      't',
      Array.from({ length: 25 }, (_, k) => ({ name: `p${k}`, x: k, y: 0.5 })),
      'x',
      'y',
    );
    const markers = [...svg.matchAll(/<circle cx="[\d.]+" cy="[\d.]+" r="5" ([^/]+)\/>/g)].map((m) => m[1]);
    expect(markers).toHaveLength(50); // point and legend marker
    expect(new Set(markers).size).toBe(25);
  });
});

describe('writeSvg', () => {
  const svg = renderSvg('t', [{ name: 'a', values: [0.5, 0.6] }]);

  /** The next fs.writeFileSync as on a full disk: half the bytes land, then ENOSPC. */
  function fullDisk(): void {
    const real = jest.requireActual<typeof import('fs')>('fs').writeFileSync;
    (fs.writeFileSync as jest.Mock).mockImplementationOnce((file: string, data: string | Buffer) => {
      const bytes = typeof data === 'string' ? Buffer.from(data) : data;
      real(file, bytes.subarray(0, bytes.length >> 1));
      throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC', syscall: 'write' });
    });
  }

  it('writes the whole file and leaves nothing else in the folder', () => {
    const dir = tmpDir('kais-plot-');
    writeSvg(path.join(dir, 'p.svg'), svg);
    expect(fs.readFileSync(path.join(dir, 'p.svg'), 'utf8')).toBe(svg);
    expect(fs.readdirSync(dir)).toEqual(['p.svg']);
  });

  it('on a full disk: one-line I/O error, no part-written plot (.svg or .png), no temporary file, the previous plot kept', () => {
    const dir = tmpDir('kais-plot-');
    for (const name of ['new.svg', 'new.png']) {
      fullDisk();
      let err: unknown;
      try {
        writeSvg(path.join(dir, name), svg);
      } catch (e) {
        err = e;
      }
      expect(isPlotWriteError(err)).toBe(true);
      expect((err as Error).message).toBe(`--plot: cannot write ${path.join(dir, name)}: ENOSPC`);
    }
    expect(fs.readdirSync(dir)).toEqual([]);
    const old = path.join(dir, 'old.svg');
    fs.writeFileSync(old, 'the previous plot');
    fullDisk();
    expect(() => writeSvg(old, svg)).toThrow(/cannot write .*old\.svg: ENOSPC/);
    expect(fs.readFileSync(old, 'utf8')).toBe('the previous plot');
    expect(fs.readdirSync(dir)).toEqual(['old.svg']);
  });

  it('refuses another extension as a usage error, not an I/O one', () => {
    let err: unknown;
    try {
      writeSvg(path.join(tmpDir('kais-plot-'), 'p.pdf'), svg);
    } catch (e) {
      err = e;
    }
    expect((err as Error).message).toMatch(/must end in \.svg or \.png/);
    expect(isPlotWriteError(err)).toBe(false);
  });
});
