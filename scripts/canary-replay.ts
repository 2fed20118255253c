/**
 * What the canary (the orchestrator's own CanaryRollout, on a clock of the run's seconds) would have
 * decided on a run's live telemetry, with no version changed: every STEP seconds a canary starts on
 * the eAPs CAN (the rest are the control; they ack it at once), and its windows are judged on the
 * per-second counts the orchestrator stored (metrics `agent/requests`, `agent/in_deadline`, one
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
import { CanaryRollout, canaryConfigProblem, DEFAULT_CANARY, type CanaryConfig } from '../orchestrator/canary';
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
  /** The canary eAPs' in-time share lowered by this much (0: an equal version). */
  loss: number;
}

/** Every replayed canary's verdict and the window it came at. */
export function replayCanaries(runs: readonly RunTelemetry[], o: ReplayOptions): { decision: 'promote' | 'rollback'; window: number }[] {
  const c = o.config;
  const out: { decision: 'promote' | 'rollback'; window: number }[] = [];
  const length = c.settleS + c.maxWindows * c.windowS;
  const body = (version: number): WeightsBody => ({ version, checksum: 0, shapes: [], tensors: [] });
  for (const run of runs) {
    for (let s0 = Math.max(o.from, c.baselineS); s0 + length < run.requests.length; s0 += o.step) {
      // the orchestrator's own rollout on a clock of the run's seconds: built baselineS before the start
      // (its baseline reaches no further back), fed each second's telemetry, the version proposed at s0
      let nowMs = (s0 - c.baselineS) * 1000;
      let next = 2;
      let verdict: { decision: 'promote' | 'rollback'; window: number } | null = null;
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
        event: (kind, message) => {
          const m = /after (\d+) window/.exec(message);
          if (m && (kind === 'canary-promote' || kind === 'canary-rollback'))
            verdict = { decision: kind === 'canary-promote' ? 'promote' : 'rollback', window: Number(m[1]) };
        },
        now: () => nowMs,
        tickMs: 3_600_000, // ticked below, second by second
      });
      const feed = (s: number, loss: number) => {
        nowMs = s * 1000;
        for (let e = 0; e < run.numEaps; e++) {
          const n = run.requests[s][e];
          const x = o.canaryEaps.has(e) ? Math.max(0, run.inDeadline[s][e] - loss * n) : run.inDeadline[s][e];
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
  for (const run of runs) {
    const problem = canaryConfigProblem({ ...DEFAULT_CANARY, eaps: [...canaryEaps] }, run.numEaps);
    if (problem) throw new UsageError(`CAN: ${problem.why}`);
  }
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
