/**
 * GPG taught by a search: behaviour cloning of scripts/gpg-lookahead.ts's choices (docs/gpg.md,
 * "Imitating the search"). The search keeps, drops or changes the orders of greedy GPG's decisions by
 * simulated lookahead; this fine-tunes a GPG model to pick the same nodes and, on each, the search's
 * action (the no-op where it dropped the order) (critic/gpg/update.ts GpgLearner.imitate), then reports greedy GPG before and
 * after on evaluation seeds the data never saw. GPG alone: the shipped model's scale-in (its `scaleIn`
 * field) is not part of what is taught or evaluated, so INIT must be a model without one.
 *
 *   SEEDS=3001-3030 FRAMES=10 HORIZON=2 DATA_OUT=d1.jsonl node dist/scripts/gpg-lookahead.js
 *   node -e "const f=require('fs'),m=JSON.parse(f.readFileSync('models/kais-gpg.json','utf8'));delete m.scaleIn;f.writeFileSync('g.json',JSON.stringify(m))"
 *   DATA=d1.jsonl INIT=g.json EPOCHS=20 BATCH=32 LR=1e-4 NODE_WEIGHT=1 SEED=1 \
 *     EVAL_SEEDS=951,952,953 EVAL_FRAMES=10 DISPATCH=lec OUT=gpg-imitated.json node dist/scripts/gpg-imitate.js
 *
 * The records of the last VALIDATE share of the data's seeds (default 0.2) are kept out of the steps:
 * the script prints, every epoch, how often greedy GPG's decision matches the teacher's on them (the
 * nodes, and the action on the orders it kept, dropped or changed), beside the same on the training records.
 */
import * as fs from 'node:fs';
import { greedyOnTeacherNodes, teacherDecision, type ImitationRecord } from '../critic/gpg/imitate';
import { gpgModelFromJson, gpgModelToJson, modelNodesPerFrame, nodesPerFrameField, updatesSeen } from '../critic/gpg/model';
import { GpgOrchestration, type GpgDecision } from '../critic/gpg/policy';
import { GpgLearner } from '../critic/gpg/update';
import type { OrchestrationPolicy } from '../shared/policy';
import { UsageError } from '../shared/errors';
import { Rng } from '../shared/rng';
import { round } from '../shared/round';
import { loadScenario } from '../shared/scenario';
import { loadBackend } from '../shared/tf-backend';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { runEpisode } from '../training/jobs/rollout';
import { buildRequests } from '../training/workload';

const env = (k: string, d: string): string => process.env[k] ?? d;
const fail = (msg: string): never => {
  throw new UsageError(msg);
};
const num = (k: string, d: number, ok: (v: number) => boolean, what: string): number => {
  const v = Number(env(k, String(d)));
  return Number.isFinite(v) && ok(v) ? v : fail(`${k} must be ${what}, got ${process.env[k]}`);
};

interface Labeled {
  seed: number;
  /** The teacher's decision (greedy's nodes but where it ordered on others, the no-op where it dropped an order). */
  decision: GpgDecision;
  /** Greedy GPG's actions on those nodes, as recorded (0 on a node greedy did not pick). */
  original: number[];
}

/** The records of the DATA files; a UsageError naming the file and line when one is not a record. */
function readData(files: string[]): Labeled[] {
  const out: Labeled[] = [];
  for (const f of files) {
    let text: string;
    try {
      text = fs.readFileSync(f, 'utf8');
    } catch (e) {
      fail(`DATA: cannot read ${f} (${(e as Error).message})`);
    }
    text!.split('\n').forEach((line, i) => {
      if (line.trim() === '') return;
      try {
        const r = JSON.parse(line) as ImitationRecord & { seed: number };
        out.push({ seed: Number(r.seed), decision: teacherDecision(r), original: greedyOnTeacherNodes(r) });
      } catch (e) {
        fail(`DATA: ${f} line ${i + 1}: ${(e as Error).message}`);
      }
    });
  }
  if (out.length === 0) fail(`DATA: no records in ${files.join(', ')}`);
  return out;
}

/**
 * How greedy's decisions compare with the teacher's: the share with the teacher's node set, and on the
 * teacher's nodes where greedy GPG (as recorded) ordered something or the teacher did, how often the
 * student's action there is the teacher's (a node it does not pick counts as the no-op): among the
 * orders the teacher kept, dropped, and changed to another action.
 */
function agreement(policy: GpgOrchestration, data: readonly Labeled[]): { nodes: number; kept: string; dropped: string; changed: string } {
  let sameNodes = 0;
  const c = { kept: [0, 0], dropped: [0, 0], changed: [0, 0] };
  for (const { decision: t, original } of data) {
    const d = policy.act(t.state);
    if (d.nodes.length === t.nodes.length && d.nodes.every((n) => t.nodes.includes(n))) sameNodes++;
    t.nodes.forEach((n, k) => {
      const want = t.actions[k];
      if (original[k] === 0 && want === 0) return;
      const h = d.nodes.indexOf(n);
      const got = h >= 0 ? d.actions[h] : 0;
      const kind = want === original[k] ? c.kept : want === 0 ? c.dropped : c.changed;
      kind[1]++;
      if (got === want) kind[0]++;
    });
  }
  const f = (x: number[]) => `${x[0]}/${x[1]}`;
  return { nodes: sameNodes / Math.max(1, data.length), kept: f(c.kept), dropped: f(c.dropped), changed: f(c.changed) };
}

async function main(): Promise<void> {
  await loadBackend();
  const scenario = loadScenario(env('SCENARIO', 'kais'));
  const frameS = scenario.slotS * scenario.slotsPerFrame;
  const files = env('DATA', '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean);
  if (files.length === 0) fail('DATA must name one or more .jsonl files written by gpg-lookahead (DATA_OUT)');
  const initFile = env('INIT', `models/${scenario.name}-gpg.json`);
  const epochs = num('EPOCHS', 20, (v) => Number.isInteger(v) && v >= 0, 'a whole number >= 0');
  const batchSize = num('BATCH', 32, (v) => Number.isInteger(v) && v >= 1, 'a whole number >= 1');
  const lr = num('LR', 1e-4, (v) => v > 0, 'positive');
  const nodeWeight = num('NODE_WEIGHT', 1, (v) => v >= 0, 'zero or more');
  const validate = num('VALIDATE', 0.2, (v) => v >= 0 && v < 1, 'in [0, 1)');
  const seed = num('SEED', 1, Number.isInteger, 'a whole number');
  const evalSeeds = env('EVAL_SEEDS', '951,952,953').split(',').map(Number);
  if (evalSeeds.some((s) => !Number.isInteger(s))) fail(`EVAL_SEEDS must be whole numbers, got ${process.env.EVAL_SEEDS}`);
  const evalFrames = num('EVAL_FRAMES', 10, (v) => Number.isInteger(v) && v >= 1, 'a whole number >= 1');
  const evalLoads = env('EVAL_LOADS', '1').split(',').map(Number);
  if (evalLoads.some((v) => !(Number.isFinite(v) && v > 0))) fail(`EVAL_LOADS must be positive numbers, got ${process.env.EVAL_LOADS}`);
  const dispatch = env('DISPATCH', 'lec');
  const out = env('OUT', `gpg-${scenario.name}-imitated.json`);

  let init: ReturnType<typeof gpgModelFromJson>;
  try {
    init = gpgModelFromJson(fs.readFileSync(initFile, 'utf8'), scenario.services.length);
  } catch (e) {
    return fail(`INIT: ${initFile}: ${(e as Error).message}`);
  }
  // the teacher's decisions and the evaluations here are GPG's alone
  if (init.meta.scaleIn)
    fail(
      `INIT: ${initFile} runs with hpa's scale-in (scaleIn), which this script does not (it trains GPG alone): use a copy of the model without the field`,
    );
  const data = readData(files);
  if (data.some((d) => d.decision.state.spec.numServices !== scenario.services.length))
    fail(`DATA: records of another scenario than ${scenario.name}`);
  const seeds = [...new Set(data.map((d) => d.seed))].sort((a, b) => a - b);
  const held = new Set(seeds.slice(seeds.length - Math.floor(seeds.length * validate)));
  const train = data.filter((d) => !held.has(d.seed));
  const val = data.filter((d) => held.has(d.seed));
  const H = modelNodesPerFrame(init.meta, scenario);
  const net = init.net;
  const greedy = () => new GpgOrchestration(net, { periodS: frameS, nodesPerDecision: H, mode: 'greedy' });
  const learner = new GpgLearner(net, { lr });
  const rng = new Rng(seed);

  /** The mean throughput rate and the total orders of `orchestration` under DISPATCH on the evaluation seeds, per load. */
  const evaluate = (orchestration: () => OrchestrationPolicy) =>
    evalLoads.map((load) => {
      let sum = 0;
      let ops = 0;
      for (const s of evalSeeds) {
        const requests = buildRequests({ scenario, workload: 'p4', tracePath: null, seed: s, load, durationS: evalFrames * frameS });
        const dispatchPolicy = makeDispatch(dispatch, scenario);
        const r = runEpisode({ scenario, requests, frames: evalFrames, seed: s, dispatch: dispatchPolicy, orchestration: orchestration() });
        sum += r.throughputRate;
        ops += r.schedulingCost;
      }
      return { throughput: round(sum / evalSeeds.length, 4), orders: ops };
    });
  const report = (epoch: number, stats: string) => {
    const a = agreement(greedy(), train);
    const b = agreement(greedy(), val);
    process.stdout.write(
      `epoch ${epoch}${stats}: training records: same nodes ${round(a.nodes, 3)}, kept ${a.kept}, dropped ${a.dropped}, changed ${a.changed} | ` +
        `validation: same nodes ${round(b.nodes, 3)}, kept ${b.kept}, dropped ${b.dropped}, changed ${b.changed}\n`,
    );
  };
  process.stdout.write(
    `${train.length} training records (${seeds.length - held.size} seeds), ${val.length} validation (${held.size}); ` +
      `the teacher differs from greedy on ${data.reduce((s, d) => s + d.decision.actions.filter((a, h) => a !== d.original[h]).length, 0)} of ${data.reduce((s, d) => s + d.decision.nodes.length, 0)} picks\n`,
  );
  const hpa = evaluate(() => makeOrchestration('hpa', scenario)).map((e) => e.throughput);
  const before = evaluate(greedy);
  report(0, '');
  for (let e = 1; e <= epochs; e++) {
    const order = train.map((_, i) => i);
    for (let i = order.length - 1; i > 0; i--) {
      const j = Math.floor(rng.next() * (i + 1));
      [order[i], order[j]] = [order[j], order[i]];
    }
    let loss = 0;
    let steps = 0;
    for (let i = 0; i < order.length; i += batchSize) {
      const batch = order.slice(i, i + batchSize).map((k) => train[k].decision);
      loss += learner.imitate(batch, nodeWeight).loss;
      steps++;
    }
    report(e, ` loss ${round(loss / Math.max(1, steps), 4)}`);
  }
  const after = evaluate(greedy);
  evalLoads.forEach((load, i) =>
    process.stdout.write(
      `evaluation load ${load}, seeds ${evalSeeds.join(',')}, ${evalFrames} frames, ${dispatch}: before ${before[i].throughput} (${before[i].orders} orders) | after ${after[i].throughput} (${after[i].orders}) | ${dispatch}/hpa ${hpa[i]}\n`,
    ),
  );
  fs.writeFileSync(
    out,
    gpgModelToJson(net, {
      scenario: scenario.name,
      ...nodesPerFrameField(H, scenario),
      trainedWith: {
        script: 'scripts/gpg-imitate.ts',
        data: files,
        records: train.length,
        epochs,
        batch: batchSize,
        lr,
        nodeWeight,
        seed,
        // no REINFORCE updates here: the entropy schedule of a later fine-tune continues from INIT's
        updates: 0,
        init: initFile,
        initUpdates: updatesSeen(init.meta),
        initTrainedWith: init.meta.trainedWith ?? null,
      },
    }),
  );
  process.stdout.write(`wrote ${out}\n`);
}

main().catch((e: Error) => {
  process.stderr.write(`gpg-imitate: ${e.message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
