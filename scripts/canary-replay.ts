/**
 * What the canary (the orchestrator's own CanaryRollout, on a clock of the run's seconds) would have
 * decided on a run's live telemetry, with no version changed: every STEP seconds a canary starts on
 * the eAPs CAN (the rest are the control; they ack it at once), and its windows are judged on the
 * per-second counts the orchestrator stored (metrics `agent/requests`, `agent/in_deadline`, one
 * point an agent a second). With nothing changed every rollback is a false alarm; with a LOSS the
 * canary eAPs' in-time count of each second is lowered by that share of its requests, a version that
 * much worse, and every rollback is a catch. Prints the share of canaries rolled back and the mean
 * window of the verdict for every combination of the listed baselineS, lagS and maxWindows; then
 * the calibration: over canaries that do not overlap, each run to its last window, the spread of d
 * against the rule's se (a calibrated se: a ratio near 1). The starts overlap (a canary spans
 * settleS + maxWindows x windowS = 42 s by default), so a run of a few minutes holds only a few
 * independent canaries.
 *
 *   node dist/scripts/canary-replay.js <orchestrator.db>... [CAN=0,1] [STEP=5] [FROM=40] \
 *     [BASES=0,30,60,120] [LAGS=0,2] [WINDOWS=4,8] [LOSSES=0,0.03,0.05,0.1,0.24] [GAPS=0,0.05]
 *
 * GAPS: the canary eAPs' in-time share lowered by that much before the start too, a canary zone
 * weaker than the control whatever the version (what the baseline is there to take out).
 *
 * A store of `kais orchestrator --db <file>`, or of `kais up --keep-store <file>`. FROM: the first start, in seconds after the first point
 * (at least the largest baseline); UNTIL: the last one (default: the last that ends within the run). The rest of the rule is DEFAULT_CANARY's (docs/safe-learning.md).
 */
import * as fs from 'node:fs';
import { CanaryRollout, canaryConfigProblem, canaryLongestS, DEFAULT_CANARY, type CanaryConfig } from '../orchestrator/canary';
import type { WeightsBody } from '../shared/protocol/envelope';
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
  /** The last start (seconds after the run's first point; default: the last that ends within the run). */
  until?: number;
  /** The canary eAPs' in-time share lowered by this much (0: an equal version). */
  loss: number;
  /** The canary eAPs' in-time share lowered by this much before the start too: a weaker canary zone (default 0). */
  gap?: number;
}

/** One replayed canary: its verdict, the window it came at, and that window's d and se. */
export interface ReplayedVerdict {
  decision: 'promote' | 'rollback';
  window: number;
  diff: number;
  se: number;
  /** The run (index into `runs`). */
  run: number;
}

/** Every replayed canary's verdict. */
export function replayCanaries(runs: readonly RunTelemetry[], o: ReplayOptions): ReplayedVerdict[] {
  const c = o.config;
  const out: ReplayedVerdict[] = [];
  const length = canaryLongestS(c, false);
  const body = (version: number): WeightsBody => ({ version, checksum: 0, shapes: [], tensors: [] });
  for (const [r, run] of runs.entries()) {
    for (let s0 = Math.max(o.from, c.baselineS); s0 + length < run.requests.length && s0 <= (o.until ?? Infinity); s0 += o.step) {
      // the orchestrator's own rollout on a clock of the run's seconds: built baselineS before the start
      // (its baseline reaches no further back), fed each second's telemetry, the version proposed at s0
      let nowMs = (s0 - c.baselineS) * 1000;
      let next = 2;
      let verdict: ReplayedVerdict | null = null;
      const rollout = new CanaryRollout({
        config: { ...c, eaps: [...o.canaryEaps] },
        numEaps: run.numEaps,
        registry: {
          publishWeights: () => body(next++),
          publishCanary: () => body(next++),
          promoteCanary: () => undefined,
          restore: () => body(next++),
        },
        store: { putCanaryState: () => undefined, putRejectedModel: () => undefined },
        current: 1,
        event: () => undefined,
        // a window that decides is the verdict (nothing else ends a replayed canary)
        onWindow: (d, window) => {
          if (d.decision !== 'wait') verdict = { decision: d.decision, window, diff: d.diff, se: d.se, run: r };
        },
        now: () => nowMs,
        tickMs: 3_600_000, // ticked below, second by second
      });
      const feed = (s: number, loss: number) => {
        nowMs = s * 1000;
        for (let e = 0; e < run.numEaps; e++) {
          const n = run.requests[s][e];
          const x = o.canaryEaps.has(e) ? Math.max(0, run.inDeadline[s][e] - (loss + (o.gap ?? 0)) * n) : run.inDeadline[s][e];
          rollout.observe(e, [
            { node: 0, ts: nowMs, cpu: 0, mem: 0, disk: 0, upBwMbps: 0, requests: n, succeeded: x, inDeadline: x, latencyMsSum: 0 },
          ]);
        }
      };
      try {
        for (let s = s0 - c.baselineS; s < s0; s++) feed(s, 0);
        nowMs = s0 * 1000;
        const started = rollout.propose([], undefined, 'replayed');
        for (const e of o.canaryEaps) rollout.applied(e, started!.version);
        for (let s = s0; s <= s0 + length && verdict === null; s++) {
          feed(s, o.loss);
          rollout.tick();
        }
      } finally {
        rollout.dispose();
      }
      if (verdict) out.push(verdict);
    }
  }
  return out;
}

/**
 * Whether the rule's se is the spread of d: equal-version canaries that do not overlap, each run to
 * its last window (margin 0 and alpha 1e-12: no test decides earlier unless |d| / se > 7; such a
 * canary is left out), the mean of d, its standard deviation within each run (a steady gap between
 * the groups is a bias, not noise), and the root mean square of the rule's se. Null below 2
 * canaries with a d.
 */
export function calibration(
  runs: readonly RunTelemetry[],
  canaryEaps: ReadonlySet<number>,
  config: CanaryConfig,
  from: number,
  until?: number,
): { n: number; mean: number; sd: number; se: number } | null {
  const c = { ...config, margin: 0, alpha: 1e-12 };
  const v = replayCanaries(runs, { canaryEaps, config: c, step: canaryLongestS(c, false) + 1, from, until, loss: 0 }).filter(
    (x) => Number.isFinite(x.diff) && x.window === c.maxWindows,
  );
  if (v.length < 2) return null;
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const byRun = new Map<number, number[]>();
  for (const x of v) byRun.set(x.run, [...(byRun.get(x.run) ?? []), x.diff]);
  let ss = 0;
  let df = 0;
  for (const ds of byRun.values()) {
    const m = mean(ds);
    ss += ds.reduce((a, x) => a + (x - m) ** 2, 0);
    df += ds.length - 1;
  }
  return {
    n: v.length,
    mean: mean(v.map((x) => x.diff)),
    sd: df > 0 ? Math.sqrt(ss / df) : NaN,
    se: Math.sqrt(mean(v.map((x) => x.se ** 2))),
  };
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
  const until = process.env.UNTIL === undefined ? undefined : list('UNTIL', process.env.UNTIL, (x) => x >= 0)[0];
  const bases = list('BASES', env('BASES', '0,30,60,120'), (x) => x >= 0 && x <= 3600);
  const losses = list('LOSSES', env('LOSSES', '0,0.03,0.05,0.1,0.24'), (x) => x >= 0 && x <= 1);
  const gaps = list('GAPS', env('GAPS', '0'), (x) => x >= 0 && x <= 1);
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
  for (const run of runs) {
    const problem = canaryConfigProblem({ ...DEFAULT_CANARY, eaps: [...canaryEaps] }, run.numEaps);
    if (problem) throw new UsageError(`CAN: ${problem.why}`);
  }
  const lags = list('LAGS', env('LAGS', String(DEFAULT_CANARY.lagS)), (x) => Number.isInteger(x) && x >= 0 && x <= 30);
  const windows = list('WINDOWS', env('WINDOWS', String(DEFAULT_CANARY.maxWindows)), (x) => Number.isInteger(x) && x >= 1 && x <= 100);
  const configs = bases.flatMap((baselineS) =>
    lags.flatMap((lagS) => windows.map((maxWindows): CanaryConfig => ({ ...DEFAULT_CANARY, baselineS, lagS, maxWindows }))),
  );
  const name = (c: CanaryConfig) =>
    `baselineS ${c.baselineS}${lags.length > 1 ? `, lagS ${c.lagS}` : ''}${windows.length > 1 ? `, ${c.maxWindows} windows` : ''}`;
  console.log(
    `the canary rule on ${files.length} run(s) (${runs.map((r) => `${r.requests.length} s`).join(', ')}), canary eAPs ${[...canaryEaps].join(', ')}, ` +
      `a start every ${step} s from ${from} s; per cell: the share of canaries rolled back (the mean window of the verdict)`,
  );
  console.log(`| rule | ${losses.map((l) => (l === 0 ? 'equal version' : `loss ${l}`)).join(' | ')} |`);
  console.log(`| --- | ${losses.map(() => '---').join(' | ')} |`);
  for (const config of configs)
    for (const gap of gaps) {
      const cells = losses.map((loss) => {
        const v = replayCanaries(runs, { canaryEaps, config, step, from: Math.max(from, config.baselineS), until, loss, gap });
        if (v.length === 0) return '-';
        const rb = v.filter((x) => x.decision === 'rollback').length;
        return `${((100 * rb) / v.length).toFixed(0)}% of ${v.length} (${(v.reduce((a, x) => a + x.window, 0) / v.length).toFixed(1)})`;
      });
      console.log(`| ${name(config)}${gaps.length > 1 ? `, canary eAPs ${gap} weaker` : ''} | ${cells.join(' | ')} |`);
    }
  // calibration: every canary runs to its last window (no test decides: margin 0, alpha 1e-12), starts that do not
  // overlap; is the rule's se the spread of d? (within a run: a gap between the groups is a bias, not noise)
  console.log(
    '\ncalibration, equal version, canaries that do not overlap, each judged at its last window: ' +
      "d (mean), its spread within a run (s.d.), the rule's se (root mean square), and the ratio s.d. / se",
  );
  console.log('| rule | canaries | d | s.d. of d | se | s.d. / se |');
  console.log('| --- | --- | --- | --- | --- | --- |');
  for (const config of configs) {
    const k = calibration(runs, canaryEaps, config, Math.max(from, config.baselineS), until);
    if (k === null) {
      console.log(`| ${name(config)} | fewer than 2 | - | - | - | - |`);
      continue;
    }
    console.log(
      `| ${name(config)} | ${k.n} | ${k.mean.toFixed(4)} | ${k.sd.toFixed(4)} | ${k.se.toFixed(4)} | ${(k.sd / k.se).toFixed(2)} |`,
    );
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
