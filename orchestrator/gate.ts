/**
 * The weight gate (issue 17 item 1): a new actor version is published only after a shadow
 * evaluation on recent live arrivals says it is good enough. The measurement is the simulator's
 * (training/jobs/gate.ts), run in a worker thread started from its compiled file
 * (training/jobs/gate-worker.js), so the orchestrator imports no training code and its event loop
 * (hub, heartbeats, fan-out, placement) never waits for the replay.
 *
 * The replay runs on the placement the agents dispatch on now (`placement`, the orchestrator's last
 * published one), held; without it, on the scenario's initial placement.
 *
 * The rule, on the same replayed requests and seed:
 *   pass  iff  requests >= minRequests
 *         and  candidate >= (1 - margin) x current          (when a current version exists)
 *         and  candidate >= (1 - margin) x best heuristic   (the best of `heuristics`)
 * `margin` is the shortfall tolerated for the simulator's noise on a short replay (0: never worse).
 * Too few arrivals is a rejection too (reason says so): a version is never published unmeasured.
 *
 * Every verdict is an event (`gate-pass`, `gate-reject`, with the numbers), counted, and the last
 * ones are kept for the admin status; rejected versions are kept (the last `keepRejected`, in
 * memory) with their reason.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Placement } from '../shared/domain';
import type { ExperienceBody } from '../shared/protocol/envelope';
import type { HeadActivation } from '../shared/nets/actor';
import { SerialWorker } from './serial-worker';
import type { Scenario } from '../shared/scenario';
import { DISPATCH_HEURISTICS } from '../shared/dispatch';
import type { ActorSpec, GateWorkerReply, GateWorkerRequest, ShadowResult } from '../shared/gate-contract';

export interface GateConfig {
  /** Shortfall against the current version and the best heuristic tolerated (0..0.5). */
  margin: number;
  /** Fewest replayed arrivals a verdict may rest on. */
  minRequests: number;
  /** Newest live arrivals kept for the replay (a ring fed from every experience frame). */
  arrivals: number;
  /** Longest replay, simulated seconds (the newest arrivals). */
  seconds: number;
  /** Heuristics the candidate must not lose to. */
  heuristics: string[];
}

export const DEFAULT_GATE: GateConfig = {
  margin: 0.01,
  minRequests: 500,
  arrivals: 20_000,
  seconds: 10,
  heuristics: ['lec', 'round-robin'],
};

/** The problem with `c` in one phrase naming the field, or null. */
export function gateConfigProblem(c: GateConfig): { field: string; why: string } | null {
  if (!(Number.isFinite(c.margin) && c.margin >= 0 && c.margin <= 0.5))
    return { field: 'margin', why: `must be in [0, 0.5], got ${c.margin}` };
  if (!(Number.isInteger(c.minRequests) && c.minRequests >= 1))
    return { field: 'minRequests', why: `must be an integer >= 1, got ${c.minRequests}` };
  if (!(Number.isInteger(c.arrivals) && c.arrivals >= 1 && c.arrivals <= 1_000_000))
    return { field: 'arrivals', why: `must be an integer in [1, 1000000], got ${c.arrivals}` };
  if (!(Number.isFinite(c.seconds) && c.seconds >= 1 && c.seconds <= 600))
    return { field: 'seconds', why: `must be a number of seconds in [1, 600], got ${c.seconds}` };
  const known: readonly string[] = DISPATCH_HEURISTICS;
  if (!Array.isArray(c.heuristics) || c.heuristics.length === 0 || !c.heuristics.every((h) => known.includes(h)))
    return { field: 'heuristics', why: `must be a non-empty list of ${known.join(', ')}` };
  return null;
}

export interface GateVerdict {
  /** The version the candidate would get (it gets it only when it passes). */
  candidate: number;
  /** The version running when it was measured. */
  current: number | null;
  pass: boolean;
  reason: string;
  numbers: ShadowResult | null;
  atMs: number;
}

export interface GateStats {
  passed: number;
  rejected: number;
  /** Evaluations that failed (worker error): counted as rejections too. */
  failed: number;
  /** Wall time of the last evaluation (ms). */
  lastMs: number;
}

/** Where the compiled worker is: dist/training/jobs/gate-worker.js (from dist/orchestrator, or from the sources under jest). */
export function defaultGateWorker(): string {
  const beside = path.join(__dirname, '..', 'training', 'jobs', 'gate-worker.js');
  // from the .ts sources (jest): the compiled worker of the last build
  return fs.existsSync(beside) ? beside : path.join(__dirname, '..', 'dist', 'training', 'jobs', 'gate-worker.js');
}

export class WeightGate {
  readonly stats: GateStats = { passed: 0, rejected: 0, failed: 0, lastMs: 0 };
  /** Newest verdicts first, at most 20. */
  readonly recent: GateVerdict[] = [];
  /** Rejected candidates, newest first, at most `keepRejected`. */
  readonly rejected: { verdict: GateVerdict; arrays: Float32Array[]; head: HeadActivation }[] = [];
  private readonly worker: SerialWorker<GateWorkerRequest, GateWorkerReply>;
  private seed = 0;
  /** Ring of the newest arrivals: eAP, service, slot (no observation is kept: the replay needs none). */
  private readonly ring: Int32Array;
  private ringNext = 0;
  private ringSize = 0;

  constructor(
    private readonly o: {
      config: GateConfig;
      scenario: Scenario;
      workerFile?: string;
      keepRejected?: number;
      onVerdict?: (v: GateVerdict) => void;
      /** How the model acts (its checkpoint's act): the replay runs candidate and current the same way. @defaultValue 'argmax' */
      act?: 'argmax' | 'sample';
      /** The placement the agents dispatch on now (null: none published yet): the replay's. Absent: the initial placement. */
      placement?: () => Placement | null;
    },
  ) {
    const problem = gateConfigProblem(o.config);
    if (problem) throw new TypeError(`WeightGate: gate.${problem.field} ${problem.why}`);
    const file = o.workerFile ?? defaultGateWorker();
    if (!fs.existsSync(file)) throw new TypeError(`WeightGate: no gate worker at ${file} (npm run build makes it)`);
    this.worker = new SerialWorker<GateWorkerRequest, GateWorkerReply>(file, 'gate');
    this.ring = new Int32Array(3 * o.config.arrivals);
  }

  /** Resolves once the worker has loaded the simulator (it starts loading at construction). */
  async ready(): Promise<void> {
    await this.worker.call({ kind: 'ping' });
  }

  /** Takes the arrivals of one accepted experience frame (the orchestrator calls it for every one). */
  observe(body: ExperienceBody): void {
    const cap = this.o.config.arrivals;
    for (const t of body.transitions) {
      const k = 3 * this.ringNext;
      this.ring[k] = t.eap;
      this.ring[k + 1] = t.service;
      this.ring[k + 2] = t.slot;
      this.ringNext = (this.ringNext + 1) % cap;
      if (this.ringSize < cap) this.ringSize++;
    }
  }

  /** Arrivals held now. */
  get arrivalsHeld(): number {
    return this.ringSize;
  }

  private arrivals(): { eap: number; service: number; slot: number }[] {
    const cap = this.o.config.arrivals;
    const out: { eap: number; service: number; slot: number }[] = [];
    const start = (this.ringNext - this.ringSize + cap) % cap;
    for (let i = 0; i < this.ringSize; i++) {
      const k = 3 * ((start + i) % cap);
      out.push({ eap: this.ring[k], service: this.ring[k + 1], slot: this.ring[k + 2] });
    }
    return out;
  }

  /** Measures `candidate` against `current` and decides; never throws (a failure is a rejection). */
  async check(candidate: ActorSpec & { version: number }, current: ActorSpec | null): Promise<GateVerdict> {
    const c = this.o.config;
    let numbers: ShadowResult | null = null;
    let pass = false;
    let reason: string;
    try {
      const r = await this.worker.call({
        kind: 'evaluate',
        input: {
          scenario: this.o.scenario,
          candidate,
          current,
          arrivals: this.arrivals(),
          placement: this.o.placement?.() ?? null,
          heuristics: c.heuristics,
          seed: ++this.seed,
          seconds: c.seconds,
          // a candidate already beaten beyond the margin is rejected without the remaining episodes
          stopBelowMargin: c.margin,
          ...(this.o.act === 'sample' ? { act: 'sample' as const } : {}),
        },
      });
      // a worker's { ok: false } rejects the call (serial-worker.ts); only a ping answers null
      if (!r.ok || r.result === null) throw new Error('the gate worker answered an evaluation with no result');
      numbers = r.result;
      this.stats.lastMs = numbers.ms;
      const bar = (x: number) => (1 - c.margin) * x;
      const cur = numbers.current;
      const h = numbers.heuristic;
      const shown = `candidate ${numbers.candidate.toFixed(4)}, current ${cur === null ? 'none' : cur.toFixed(4)}, ${h.name ? `best heuristic ${h.name} ${h.rate.toFixed(4)}` : 'no heuristic run'}${numbers.stopped ? ' (stopped early)' : ''} on ${numbers.requests} replayed arrivals (${numbers.durationS.toFixed(1)} s, ${numbers.ms.toFixed(0)} ms) on the ${numbers.placement} placement${numbers.placementProblem ? ` (the live one: ${numbers.placementProblem})` : ''}`;
      if (numbers.requests < c.minRequests) reason = `too few live arrivals to judge: ${numbers.requests} < minRequests ${c.minRequests}`;
      else if (cur !== null && numbers.candidate < bar(cur)) reason = `worse than the current version beyond margin ${c.margin}: ${shown}`;
      else if (numbers.candidate < bar(h.rate)) reason = `worse than ${h.name} beyond margin ${c.margin}: ${shown}`;
      else {
        pass = true;
        reason = shown;
      }
    } catch (e) {
      this.stats.failed++;
      reason = `shadow evaluation failed: ${(e as Error).message}`;
    }
    if (pass) this.stats.passed++;
    else this.stats.rejected++;
    const verdict: GateVerdict = {
      candidate: candidate.version,
      current: current?.version ?? null,
      pass,
      reason,
      numbers,
      atMs: Date.now(),
    };
    this.recent.unshift(verdict);
    this.recent.length = Math.min(this.recent.length, 20);
    if (!pass) {
      this.rejected.unshift({ verdict, arrays: candidate.arrays, head: candidate.head });
      this.rejected.length = Math.min(this.rejected.length, this.o.keepRejected ?? 5);
    }
    this.o.onVerdict?.(verdict);
    return verdict;
  }

  dispose(): void {
    this.worker.dispose();
  }
}
