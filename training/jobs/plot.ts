/**
 * Line plots for `kais eval --plot` and `kais train` learning curves: an SVG written by hand (it is
 * a few lines of markup), and PNG rendered from that SVG by @resvg/resvg-js (a maintained
 * rasteriser shipped as a prebuilt binary inside its npm package; text uses the system fonts).
 */
import * as path from 'path';
import { UsageError } from '../../shared/errors';
import { AtomicWriteError, writeFileAtomically } from '../../shared/atomic-write';

export interface Series {
  name: string;
  values: number[];
  /** draw dashed (e.g. baselines next to a learning curve) */
  dashed?: boolean;
}

/**
 * Series colours: Tableau's 20 (dark and light of 10 hues) with black for the lightest grey, the
 * first twelve in the order plots used before. `kais eval` plots 13 series by default (12
 * heuristic pairs and cmmac/hpa) and --policies may list more: past the palette a series keeps a
 * colour and gets a dash pattern (lines) or a ring instead of a dot (scatter), so every series of a
 * chart is drawn differently (seriesStyle).
 */
const COLORS = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#7f7f7f',
  '#bcbd22',
  '#17becf',
  '#000000',
  '#aec7e8',
  '#ffbb78',
  '#98df8a',
  '#ff9896',
  '#c5b0d5',
  '#c49c94',
  '#f7b6d2',
  '#dbdb8d',
  '#9edae5',
];
/** Dash patterns for each further round through the palette ('' = solid). */
const DASHES = ['', '6 4', '2 3', '10 3 2 3'];

/** Colour and line style of the k-th series (0-based): distinct for k < COLORS.length x DASHES.length (80). */
export function seriesStyle(k: number): { color: string; dash: string } {
  return { color: COLORS[k % COLORS.length], dash: DASHES[Math.floor(k / COLORS.length) % DASHES.length] };
}

function esc(s: string): string {
  return s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** The plotting area of a chart (820 x 460, legend on the right) and its y scale from 0 to yMax. */
interface ChartFrame {
  W: number;
  H: number;
  left: number;
  top: number;
  pw: number;
  ph: number;
  yMax: number;
  y: (v: number) => number;
}

function chartFrame(left: number, yMax: number): ChartFrame {
  const W = 820;
  const H = 460;
  const right = 230;
  const top = 40;
  const bottom = 50;
  const pw = W - left - right;
  const ph = H - top - bottom;
  return { W, H, left, top, pw, ph, yMax, y: (v: number) => top + ph - (Math.max(0, v) / yMax) * ph };
}

/** The SVG's opening, background, title, y grid with labels, x ticks, axes and axis labels. */
function drawFrame(f: ChartFrame, title: string, xLabel: string, yLabel: string, xTicks: [number, string][]): string[] {
  const { W, H, left, top, pw, ph, yMax, y } = f;
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${left}" y="24" font-size="15">${esc(title)}</text>`);
  for (let k = 0; k <= 5; k++) {
    const v = (yMax * k) / 5;
    out.push(`<line x1="${left}" y1="${y(v).toFixed(1)}" x2="${left + pw}" y2="${y(v).toFixed(1)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 8}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v.toFixed(2)}</text>`);
  }
  for (const [px, label] of xTicks) out.push(`<text x="${px.toFixed(1)}" y="${top + ph + 18}" text-anchor="middle">${label}</text>`);
  out.push(`<line x1="${left}" y1="${top + ph}" x2="${left + pw}" y2="${top + ph}" stroke="#333"/>`);
  out.push(`<line x1="${left}" y1="${top}" x2="${left}" y2="${top + ph}" stroke="#333"/>`);
  out.push(`<text x="${left + pw / 2}" y="${H - 12}" text-anchor="middle">${esc(xLabel)}</text>`);
  out.push(`<text x="16" y="${top + ph / 2}" text-anchor="middle" transform="rotate(-90 16 ${top + ph / 2})">${esc(yLabel)}</text>`);
  return out;
}

/** An SVG line chart, x = frame index (1-based), y in [0, 1] unless values exceed it. */
export function renderSvg(title: string, series: Series[], xLabel = 'frame', yLabel = 'throughput rate'): string {
  const n = Math.max(1, ...series.map((s) => s.values.length));
  const yMax = Math.max(1, ...series.flatMap((s) => s.values.filter((v) => Number.isFinite(v))));
  const f = chartFrame(60, yMax);
  const { left, top, pw } = f;
  const x = (i: number): number => left + (n === 1 ? pw / 2 : (i / (n - 1)) * pw);
  const y = f.y;
  const ticks = Math.min(n, 10);
  const xTicks: [number, string][] = [];
  for (let k = 0; k < ticks; k++) {
    const i = ticks === 1 ? 0 : Math.round((k * (n - 1)) / (ticks - 1));
    xTicks.push([x(i), String(i + 1)]);
  }
  const out = drawFrame(f, title, xLabel, yLabel, xTicks);
  series.forEach((s, k) => {
    const { color, dash: styleDash } = seriesStyle(k);
    const dash = s.dashed && styleDash === '' ? '6 4' : styleDash;
    const dashAttr = dash === '' ? '' : ` stroke-dasharray="${dash}"`;
    // non-finite values (e.g. frames without an evaluation) are skipped, the line joins the rest
    const pts = s.values
      .map((v, i) => (Number.isFinite(v) ? `${x(i).toFixed(1)},${y(v).toFixed(1)}` : ''))
      .filter((p) => p !== '')
      .join(' ');
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2"${dashAttr} points="${pts}"/>`);
    const ly = top + 8 + k * 18;
    out.push(`<line x1="${left + pw + 16}" y1="${ly}" x2="${left + pw + 40}" y2="${ly}" stroke="${color}" stroke-width="2"${dashAttr}/>`);
    out.push(`<text x="${left + pw + 46}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** One labelled point of a scatter plot. */
export interface Point {
  name: string;
  x: number;
  y: number;
}

/** An SVG scatter chart (same frame as renderSvg), each point labelled; both axes from 0. */
export function renderScatter(title: string, points: Point[], xLabel: string, yLabel: string): string {
  const finite = points.filter((p) => Number.isFinite(p.x) && Number.isFinite(p.y));
  const yMax = Math.max(1, ...finite.map((p) => p.y));
  const f = chartFrame(70, yMax);
  const { left, top, pw } = f;
  const xMax = niceMax(Math.max(0, ...finite.map((p) => p.x)));
  const x = (v: number): number => left + (Math.max(0, v) / xMax) * pw;
  const y = f.y;
  const xTicks: [number, string][] = [];
  for (let k = 0; k <= 5; k++) xTicks.push([x((xMax * k) / 5), formatTick((xMax * k) / 5)]);
  const out = drawFrame(f, title, xLabel, yLabel, xTicks);
  finite.forEach((p, k) => {
    // past the palette: a ring (solid, then dashed) instead of a dot
    const { color, dash } = seriesStyle(k);
    const round = Math.floor(k / COLORS.length);
    const paint =
      round === 0
        ? `fill="${color}"`
        : `fill="white" stroke="${color}" stroke-width="2"${round >= 2 ? ` stroke-dasharray="${dash === '' ? '2 2' : dash}"` : ''}`;
    out.push(`<circle cx="${x(p.x).toFixed(1)}" cy="${y(p.y).toFixed(1)}" r="5" ${paint}/>`);
    const ly = top + 8 + k * 18;
    out.push(`<circle cx="${left + pw + 28}" cy="${ly}" r="5" ${paint}/>`);
    out.push(`<text x="${left + pw + 46}" y="${ly + 4}">${esc(p.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

function formatTick(v: number): string {
  return v >= 10_000 ? `${(v / 1000).toFixed(0)}k` : v >= 1000 ? `${(v / 1000).toFixed(1)}k` : v.toFixed(0);
}

/** Several SVG charts stacked top to bottom in one SVG. */
export function stackSvgs(svgs: string[]): string {
  const sizes = svgs.map((s) => {
    const m = /<svg [^>]*width="(\d+)" height="(\d+)"/.exec(s);
    if (!m) throw new TypeError('stackSvgs: a chart without width and height');
    return { w: Number(m[1]), h: Number(m[2]) };
  });
  const W = Math.max(...sizes.map((z) => z.w));
  const H = sizes.reduce((a, z) => a + z.h, 0);
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}">`];
  let yOff = 0;
  svgs.forEach((s, i) => {
    out.push(s.trim().replace(/^<svg /, `<svg x="0" y="${yOff}" `));
    yOff += sizes[i].h;
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

/** Writes an .svg or .png plot; the file name's extension decides. */
export function writePlot(file: string, title: string, series: Series[], xLabel?: string, yLabel?: string): void {
  writeSvg(file, renderSvg(title, series, xLabel, yLabel));
}

/** The code of the UsageError writeSvg throws when the file system refuses the plot (not the user's flag: exit 1). */
export const PLOT_WRITE_FAILED = 'KAIS_ERR_PLOT_WRITE';

/** Whether `e` is writeSvg's I/O failure (a full disk, a read-only folder), as against a bad --plot name. */
export function isPlotWriteError(e: unknown): e is UsageError {
  return e instanceof UsageError && e.code === PLOT_WRITE_FAILED;
}

/**
 * Writes an SVG as .svg, or rendered as .png; the file name's extension decides. Atomically: the
 * bytes go to a temporary file in the same folder, renamed over `file` once all are written, so a
 * full disk leaves the previous plot (or none), never a 0-byte .svg or a cut .png; the temporary
 * file is removed on failure. The failure is a UsageError with code PLOT_WRITE_FAILED (one line).
 */
export function writeSvg(file: string, svg: string): void {
  const ext = path.extname(file).toLowerCase();
  let data: string | Buffer;
  if (ext === '.svg') data = svg;
  else if (ext === '.png') {
    // loaded lazily: only PNG output needs the native rasteriser
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { Resvg } = require('@resvg/resvg-js') as typeof import('@resvg/resvg-js');
    data = new Resvg(svg, { font: { loadSystemFonts: true, defaultFontFamily: 'DejaVu Sans' } }).render().asPng();
  } else throw new UsageError(`--plot: ${file}: the file must end in .svg or .png`);
  try {
    writeFileAtomically(file, data);
  } catch (e) {
    const code = e instanceof AtomicWriteError ? e.code : String(e);
    throw new UsageError(`--plot: cannot write ${file}: ${code}`, PLOT_WRITE_FAILED);
  }
}
