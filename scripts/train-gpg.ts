/**
 * Trains GPG on the simulator under a fixed dispatch (a heuristic, or the shipped cMMAC frozen) and
 * writes the model for `kais eval --policies lec/gpg --gpg <model.json>` (issue 16; GPG learning
 * beside cMMAC is `kais train --policies cmmac/gpg`, docs/gpg.md). Settings from the environment:
 *
 *   SCENARIO=small DISPATCH=lec UPDATES=150 ROLLOUTS=8 FRAMES=8 LOAD=1 LOADS= SEED=1 OP_COST=0.002
 *   REPLICA_COST=0 EVAL_EVERY=25 EVAL_SEEDS=901,902,903 EVAL_FRAMES=10 ENCODER=gnn OUT=gpg-small.json
 *   LR=1e-3 ENTROPY_START=1 ENTROPY_DECAY=1e-3
 *   node dist/scripts/train-gpg.js
 *
 * ENCODER=stack trains the state-stacking ablation (critic/gpg/gnn.ts: same heads, no message
 * passing), for the paper's GNN-vs-stacking comparison (docs/gpg.md).
 *
 * INIT=<model.json> fine-tunes a model (fresh Adam; the entropy schedule continues from every update
 * it has seen: critic/gpg/model.ts updatesSeen). An INIT with hpa's scale-in (`scaleIn`, as the
 * shipped models/kais-gpg.json) is trained under it, every rollout and evaluation GPG then the
 * scale-in, and the model written keeps the field; a copy without the field trains GPG alone.
 * DISPATCH=cmmac trains under the shipped cMMAC model (models/<scenario>-cmmac.bin, argmax, frozen);
 * LOADS=1,1.5 alternates the training load per update (evaluations stay at LOAD).
 *
 * TRACES=a.csv,b.csv trains on Alibaba trace windows (as kais eval --trace; cut the CSV to choose a
 * window) instead of WORKLOAD: update u replays window floor(u / #LOADS) mod #TRACES, so every window
 * comes at every load. EVAL_TRACE=c.csv makes the evaluations replay that window (keep it apart from
 * the training windows). A missing or unreadable file exits 2 before training starts.
 *
 * VINE=L trains on vine rollouts (training/jobs/gpg-train.ts `vine`): every rollout greedy but at one
 * branch decision (cycling over the first FRAMES - L), sampled there, then greedy for L frames; the
 * gradient is on the branch decisions, their advantage the L frames' reward against the others'.
 * VINE_PERTURB=1 makes the branch greedy but for one picked node's action, drawn (critic/gpg/policy.ts
 * mode perturb): each alternative is one order against the greedy one, with the others held.
 *
 * NODES_PER_FRAME=H sets GPG's action budget, the nodes it may change per frame (default: INIT's,
 * else the scenario's scaleNodesPerFrame); the model records it and kais eval / kais up use it.
 *
 * Prints one line per update and an evaluation (greedy GPG and dispatch/hpa on the held-out
 * evaluation seeds) every EVAL_EVERY updates; writes OUT (the model) and OUT's .curve.json.
 */
import * as fs from 'node:fs';
import {
  gpgModelFromJson,
  gpgModelToJson,
  modelNodesPerFrame,
  nodesPerFrameField,
  updatesSeen,
  type GpgScaleIn,
} from '../critic/gpg/model';
import { DEFAULT_GPG_UPDATE } from '../critic/gpg/update';
import { loadScenario } from '../shared/scenario';
import { loadBackend } from '../shared/tf-backend';
import { UsageError } from '../shared/errors';
import { trainGpg } from '../training/jobs/gpg-train';
import { loadTrace } from '../training/workload';
import type { WorkloadName } from '../training/workload';

const env = (k: string, d: string): string => process.env[k] ?? d;
const num = (k: string, d: number): number => {
  const v = Number(env(k, String(d)));
  if (!Number.isFinite(v)) {
    process.stderr.write(`train-gpg: ${k} must be a number, got ${process.env[k]}\n`);
    process.exit(2);
  }
  return v;
};

const positive = (k: string, d: number, orZero = false): number => {
  const v = num(k, d);
  if (v < 0 || (v === 0 && !orZero)) {
    process.stderr.write(`train-gpg: ${k} must be ${orZero ? 'zero or more' : 'positive'}, got ${process.env[k]}\n`);
    process.exit(2);
  }
  return v;
};

/** A trace window named in `k`, read once now so a bad file stops the run before it trains. */
const traceFile = (k: string, f: string): string => {
  if (!fs.existsSync(f)) {
    process.stderr.write(`train-gpg: ${k}: ${f} does not exist\n`);
    process.exit(2);
  }
  try {
    loadTrace(f);
  } catch (e) {
    process.stderr.write(`train-gpg: ${k}: ${(e as Error).message.replace(/^--trace: /, '')}\n`);
    process.exit(2);
  }
  return f;
};

async function main(): Promise<void> {
  await loadBackend();
  const scenario = loadScenario(env('SCENARIO', 'small'));
  const out = env('OUT', `gpg-${scenario.name}.json`);
  const settings = {
    dispatch: env('DISPATCH', 'lec'),
    workload: env('WORKLOAD', 'p4') as WorkloadName,
    load: num('LOAD', 1),
    // load mix (LOADS=1,1.5): update u trains at the (u mod k)-th; evaluations at LOAD
    loads: env('LOADS', '')
      .split(',')
      .filter((x) => x.trim() !== '')
      .map((x) => {
        const v = Number(x);
        if (!Number.isFinite(v) || v <= 0) {
          process.stderr.write(`train-gpg: LOADS must be positive numbers, got ${process.env.LOADS}\n`);
          process.exit(2);
        }
        return v;
      }),
    frames: num('FRAMES', 8),
    rollouts: num('ROLLOUTS', 8),
    updates: num('UPDATES', 150),
    seed: num('SEED', 1),
    opCost: num('OP_COST', 0.002),
    replicaCost: num('REPLICA_COST', 0),
    evalEvery: num('EVAL_EVERY', 25),
    evalSeeds: env('EVAL_SEEDS', '901,902,903').split(',').map(Number),
    evalFrames: num('EVAL_FRAMES', 10),
    // the learner's step size and entropy schedule (critic/gpg/update.ts DEFAULT_GPG_UPDATE)
    update: {
      lr: positive('LR', DEFAULT_GPG_UPDATE.lr),
      entropyStart: positive('ENTROPY_START', DEFAULT_GPG_UPDATE.entropyStart, true),
      entropyDecay: positive('ENTROPY_DECAY', DEFAULT_GPG_UPDATE.entropyDecay, true),
    },
    ...(process.env.TRACES
      ? {
          traces: process.env.TRACES.split(',')
            .filter((x) => x.trim() !== '')
            .map((f) => traceFile('TRACES', f.trim())),
        }
      : {}),
    ...(process.env.EVAL_TRACE ? { evalTrace: traceFile('EVAL_TRACE', process.env.EVAL_TRACE) } : {}),
    ...(process.env.VINE !== undefined
      ? { vine: { horizon: positive('VINE', 1), ...(process.env.VINE_PERTURB === '1' ? { perturb: true } : {}) } }
      : {}),
  };
  if (settings.vine && !(Number.isInteger(settings.vine.horizon) && settings.vine.horizon < settings.frames)) {
    process.stderr.write(`train-gpg: VINE must be a whole number of frames below FRAMES (${settings.frames}), got ${process.env.VINE}\n`);
    process.exit(2);
  }
  // INIT=<model.json>: fine-tune that model (its net config; the entropy schedule continues from all its updates)
  const initFile = process.env.INIT;
  const encoder = env('ENCODER', 'gnn');
  if (encoder !== 'gnn' && encoder !== 'stack') {
    process.stderr.write(`train-gpg: ENCODER must be gnn or stack, got ${encoder}\n`);
    process.exit(2);
  }
  if (initFile && process.env.ENCODER !== undefined) {
    process.stderr.write('train-gpg: ENCODER comes from the INIT model; leave it out with INIT\n');
    process.exit(2);
  }
  let init: { weights: Float32Array[]; updates: number } | undefined;
  let net: ReturnType<typeof gpgModelFromJson>['net'] | undefined;
  let nodesPerFrame = scenario.scaleNodesPerFrame;
  let scaleIn: GpgScaleIn | undefined;
  if (initFile) {
    let m: ReturnType<typeof gpgModelFromJson>;
    try {
      m = gpgModelFromJson(fs.readFileSync(initFile, 'utf8'), scenario.services.length);
    } catch (e) {
      // a missing, unreadable or malformed model is the user's input: one line, exit 2
      process.stderr.write(`train-gpg: INIT: ${initFile}: ${(e as Error).message}\n`);
      process.exit(2);
    }
    // a model that runs with hpa's scale-in is trained under it and keeps it
    scaleIn = m.meta.scaleIn;
    net = m.net;
    nodesPerFrame = modelNodesPerFrame(m.meta, scenario);
    // every update the model has seen, its init's included (before 2026-12-02 only the last run's count was read,
    // so a fine-tune of a fine-tune restarted the entropy high: docs/gpg.md)
    init = { weights: m.net.getWeights(), updates: updatesSeen(m.meta) };
  }
  if (process.env.NODES_PER_FRAME !== undefined) {
    nodesPerFrame = positive('NODES_PER_FRAME', nodesPerFrame);
    if (!Number.isInteger(nodesPerFrame)) {
      process.stderr.write(`train-gpg: NODES_PER_FRAME must be a whole number, got ${process.env.NODES_PER_FRAME}\n`);
      process.exit(2);
    }
  }
  const t0 = Date.now();
  const r = trainGpg(
    { scenario, ...settings, nodesPerFrame, scaleIn, ...(net ? { net: net.config, init } : { net: { encoder } }) },
    (line) => process.stdout.write(`${((Date.now() - t0) / 1000).toFixed(0)}s ${line}\n`),
  );
  fs.writeFileSync(
    out,
    gpgModelToJson(r.net, {
      scenario: scenario.name,
      ...nodesPerFrameField(nodesPerFrame, scenario),
      ...(scaleIn ? { scaleIn } : {}),
      trainedWith: {
        ...settings,
        encoder: net?.config.encoder ?? encoder,
        ...(initFile ? { init: initFile, initUpdates: init!.updates } : {}),
        script: 'scripts/train-gpg.ts',
      },
    }),
  );
  fs.writeFileSync(out.replace(/\.json$/, '') + '.curve.json', JSON.stringify({ curve: r.curve, evals: r.evals }) + '\n');
  process.stdout.write(`wrote ${out}\n`);
}

main().catch((e) => {
  process.stderr.write(`train-gpg: ${(e as Error).message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
