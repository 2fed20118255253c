import { renderScatter, renderSvg, seriesStyle } from '../../../../training/jobs/plot';

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
