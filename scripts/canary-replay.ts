/**
 * What the canary rule (orchestrator/canary.ts: the same canaryDecision and clusterDiffVariance the
 * orchestrator runs) would have decided on a run's live telemetry, with no version changed: every
 * STEP seconds a canary starts on the eAPs CAN (the rest are the control), and its windows are judged
 * on the per-second counts the orchestrator stored (metrics `agent/requests`, `agent/in_deadline`, one
 * point an agent a second). With nothing changed every rollback is a false alarm; with a LOSS the
 * canary eAPs' in-time count of each second is lowered by that share of its requests, a version that
 * much worse, and every rollback is a catch. Prints, per baselineS, the share of canaries rolled back
 * and the mean window of the verdict. The starts overlap (a canary spans settleS + maxWindows x
 * windowS = 42 s by default), so a run of a few minutes holds only a few independent canaries.
 *
 *   node dist/scripts/canary-replay.js <orchestrator.db>... [CAN=0,1] [STEP=5] [FROM=40] \
 *     [BASES=0,30,60,120] [LOSSES=0,0.03,0.05,0.1,0.24]
 *
 * A store of `kais orchestrator --db <file>`, or of `kais up --keep-store <file>`. FROM: the first start, in seconds after the first point
 * (at least the largest baseline). The rest of the rule is DEFAULT_CANARY's (docs/safe-learning.md).
 */
import * as fs from 'node:fs';
import {
  canaryDecision,
  clusterDiffVariance,
  DEFAULT_CANARY,
  type CanaryConfig,
  type Outcomes,
  type SecondCounts,
} from '../orchestrator/canary';
import { Store } from '../orchestrator/store';
import { UsageError } from '../shared/errors';

/** One run's telemetry: per second since its first point, per eAP, requests and in-time answers. */
export interface RunTelemetry {
  numEaps: number;
  requests: number[][];
  inDeadline: number[][];
}

/** The per-second counts of a store's `agent/requests` and `agent/in_deadline` points. */
export function telemetryOf(points: { requests: readonly Point[]; inDeadline: readonly Point[] }): RunTelemetry {
  const all = [...points.requests, ...points.inDeadline];
  if (all.length === 0) throw new UsageError('no agent telemetry in the store (metrics agent/requests, agent/in_deadline)');
  const t0 = Math.min(...all.map((p) => p.tsMs));
  const span = Math.floor((Math.max(...all.map((p) => p.tsMs)) - t0) / 1000) + 1;
  const numEaps = Math.max(...all.map((p) => p.eap ?? 0)) + 1;
  const grid = () => Array.from({ length: span }, () => new Array<number>(numEaps).fill(0));
  const requests = grid();
  const inDeadline = grid();
  for (const [into, list] of [
    [requests, points.requests],
    [inDeadline, points.inDeadline],
  ] as const)
    for (const p of list) if (p.eap !== null) into[Math.floor((p.tsMs - t0) / 1000)][p.eap] += p.value;
  return { numEaps, requests, inDeadline };
}

interface Point {
  tsMs: number;
  eap: number | null;
  value: number;
}

export interface ReplayOptions {
  canaryEaps: ReadonlySet<number>;
  config: CanaryConfig;
  /** Seconds between starts. */
  step: number;
  /** The first start (seconds after the run's first point); at least config.baselineS. */
  from: number;
  /** The canary eAPs' in-time share lowered by this much (0: an equal version). */
  loss: number;
}

/** Every replayed canary's verdict and the window it came at. */
export function replayCanaries(runs: readonly RunTelemetry[], o: ReplayOptions): { decision: 'promote' | 'rollback'; window: number }[] {
  const c = o.config;
  const out: { decision: 'promote' | 'rollback'; window: number }[] = [];
  const seconds = (run: RunTelemetry, a: number, b: number, loss: number): SecondCounts[] => {
    const got: SecondCounts[] = [];
    for (let s = Math.max(0, a); s < b; s++) {
      const x: SecondCounts = { nc: 0, xc: 0, nk: 0, xk: 0 };
      for (let e = 0; e < run.numEaps; e++) {
        const n = run.requests[s][e];
        const k = run.inDeadline[s][e];
        if (o.canaryEaps.has(e)) {
          x.nc += n;
          x.xc += Math.max(0, k - loss * n);
        } else {
          x.nk += n;
          x.xk += k;
        }
      }
      got.push(x);
    }
    return got;
  };
  const sum = (list: readonly SecondCounts[]): { canary: Outcomes; control: Outcomes } => {
    const g = (n: number, x: number): Outcomes => ({ requests: n, inDeadline: x, late: 0, refused: n - x });
    let nc = 0;
    let xc = 0;
    let nk = 0;
    let xk = 0;
    for (const b of list) {
      nc += b.nc;
      xc += b.xc;
      nk += b.nk;
      xk += b.xk;
    }
    return { canary: g(nc, xc), control: g(nk, xk) };
  };
  const length = c.settleS + c.maxWindows * c.windowS;
  for (const run of runs) {
    for (let s0 = Math.max(o.from, c.baselineS); s0 + length <= run.requests.length; s0 += o.step) {
      const before = c.baselineS > 0 ? seconds(run, s0 - c.baselineS, s0, 0) : null;
      const baseline = before ? { ...sum(before), diffVar: clusterDiffVariance(before) } : null;
      for (let w = 1; w <= c.maxWindows; w++) {
        const during = seconds(run, s0 + c.settleS, s0 + c.settleS + w * c.windowS, o.loss);
        const d = canaryDecision({ ...sum(during), diffVar: clusterDiffVariance(during), baseline }, c, w);
        if (d.decision === 'wait') continue;
        out.push({ decision: d.decision, window: w });
        break;
      }
    }
  }
  return out;
}

function list(name: string, v: string, ok: (x: number) => boolean): number[] {
  const xs = v.split(',').map((t) => Number(t.trim()));
  if (xs.length === 0 || !xs.every((x) => Number.isFinite(x) && ok(x))) throw new UsageError(`${name}: a bad list "${v}"`);
  return xs;
}

function main(): void {
  const files = process.argv.slice(2);
  if (files.length === 0) throw new UsageError('name one or more orchestrator stores (orchestrator.db)');
  const env = (k: string, d: string) => process.env[k] ?? d;
  const canaryEaps = new Set(list('CAN', env('CAN', '0,1'), (x) => Number.isInteger(x) && x >= 0));
  const [step] = list('STEP', env('STEP', '5'), (x) => x >= 1);
  const [from] = list('FROM', env('FROM', '40'), (x) => x >= 0);
  const bases = list('BASES', env('BASES', '0,30,60,120'), (x) => x >= 0 && x <= 3600);
  const losses = list('LOSSES', env('LOSSES', '0,0.03,0.05,0.1,0.24'), (x) => x >= 0 && x <= 1);
  const runs = files.map((f) => {
    if (!fs.existsSync(f)) throw new UsageError(`${f}: no such file`);
    const store = Store.open(f, { readonly: true });
    try {
      return telemetryOf({ requests: store.metrics('agent/requests'), inDeadline: store.metrics('agent/in_deadline') });
    } catch (e) {
      throw e instanceof UsageError ? new UsageError(`${f}: ${e.message}`) : e;
    } finally {
      store.close();
    }
  });
  for (const run of runs)
    if ([...canaryEaps].some((e) => e >= run.numEaps) || canaryEaps.size >= run.numEaps)
      throw new UsageError(`CAN: eAPs ${[...canaryEaps].join(',')} must be some, not all, of the run's ${run.numEaps}`);
  console.log(
    `the canary rule on ${files.length} run(s) (${runs.map((r) => `${r.requests.length} s`).join(', ')}), canary eAPs ${[...canaryEaps].join(', ')}, ` +
      `a start every ${step} s from ${from} s; per cell: the share of canaries rolled back (the mean window of the verdict)`,
  );
  console.log(`| baselineS | ${losses.map((l) => (l === 0 ? 'equal version' : `loss ${l}`)).join(' | ')} |`);
  console.log(`| --- | ${losses.map(() => '---').join(' | ')} |`);
  for (const baselineS of bases) {
    const cells = losses.map((loss) => {
      const v = replayCanaries(runs, { canaryEaps, config: { ...DEFAULT_CANARY, baselineS }, step, from: Math.max(from, baselineS), loss });
      if (v.length === 0) return '-';
      const rb = v.filter((x) => x.decision === 'rollback').length;
      return `${((100 * rb) / v.length).toFixed(0)}% of ${v.length} (${(v.reduce((a, x) => a + x.window, 0) / v.length).toFixed(1)})`;
    });
    console.log(`| ${baselineS} | ${cells.join(' | ')} |`);
  }
}

if (require.main === module) {
  try {
    main();
  } catch (e) {
    // a user's mistake (a missing file, a bad list) is one line and exit 2; anything else is a bug: exit 1
    process.stderr.write(`canary-replay: ${(e as Error).message}\n`);
    process.exit(e instanceof UsageError ? 2 : 1);
  }
}
