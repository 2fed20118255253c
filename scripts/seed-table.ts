/**
 * A held-out table of `kais eval` pairs over many seeds and loads (docs/gpg.md): each pair's mean
 * throughput rate (standard error over the seeds), the reference pair's per-seed paired ratio to it,
 * mean replica-seconds and scale operations. Each cell is `kais eval --scenario S --seed s --load L
 * --frames F --policies <pair> [--gpg G]` (runEval, the same defaults); nothing is chosen from it.
 *
 *   SCENARIO=kais SEEDS=2001-2010 LOADS=1,1.5 GPG=models/kais-gpg-lec.json \
 *     POLICIES=lec/gpg,lec/hpa,lec/static,lec/gsp-ss,lec/hindsight node dist/scripts/seed-table.js
 *
 * SCENARIO (default kais), SEEDS (a-b or a,b,...; default 2001-2010), LOADS (default 1), FRAMES
 * (default 20), POLICIES (comma-separated pairs; the first is the reference), GPG (a model for x/gpg
 * pairs; default: the shipped models/<scenario>-gpg.json), CHECKPOINT (a kais train checkpoint for cmmac
 * pairs, as kais eval --checkpoint; default: the shipped actor), CMMAC_ACT (argmax or sample, as kais eval --cmmac-act; default: the model's act), TRACE (an Alibaba batch_task CSV to replay instead
 * of P4, as kais eval --trace: every seed replays the same rows, wrapped, with its own jitter and request
 * shapes; cut the CSV to choose the window), JSON_OUT (a file for every cell's per-seed
 * figures, so runs of different pairs on the same seeds can be paired afterwards: seed-pair.ts).
 * Prints a markdown table on stdout and one progress line per cell on stderr.
 */
import * as fs from 'node:fs';
import { defaultsOf } from '../shared/config';
import { loadBackend } from '../shared/tf-backend';
import { EVAL_SPEC, runEvalSeeds, type EvalArgs, type EvalReport } from '../training/jobs/eval';
import { mean, se, seedList, type SeedCells } from './seed-stats';
import { UsageError } from '../shared/errors';

async function main(): Promise<void> {
  await loadBackend(); // the backend kais eval runs a gpg pair on
  const scenario = process.env.SCENARIO ?? 'kais';
  const seeds = seedList(process.env.SEEDS ?? '2001-2010');
  const loads = (process.env.LOADS ?? '1').split(',').map(Number);
  const frames = Number(process.env.FRAMES ?? 20);
  const pairs = (process.env.POLICIES ?? '').split(',').filter((p) => p.length > 0);
  if (pairs.length === 0) throw new Error('POLICIES: give the pairs, the reference first');
  const ref = pairs[0];
  const trace = process.env.TRACE ?? null;
  const cmmacAct = process.env.CMMAC_ACT;
  if (cmmacAct !== undefined && cmmacAct !== 'argmax' && cmmacAct !== 'sample')
    throw new Error(`CMMAC_ACT: argmax or sample, got ${cmmacAct}`);
  console.log(
    `${scenario}${trace ? `, trace ${trace}` : ', p4'}, seeds ${seeds[0]}..${seeds[seeds.length - 1]} (${seeds.length}), ${frames} frames; ratio: ${ref} / pair`,
  );
  console.log('');
  console.log(`| load | pair | throughput (s.e.) | ${ref} / pair (paired s.e.) | replica-s | operations |`);
  console.log('| --- | --- | --- | --- | --- | --- |');
  const cells: SeedCells = {
    scenario,
    seeds,
    frames,
    gpg: process.env.GPG ?? null,
    ...(trace ? { trace } : {}),
    ...(process.env.CHECKPOINT ? { checkpoint: process.env.CHECKPOINT } : {}),
    loads: {},
  };
  for (const load of loads) {
    const a = {
      ...defaultsOf(EVAL_SPEC),
      scenario,
      workload: 'p4',
      ...(trace ? { trace } : {}),
      policies: pairs.join(','),
      gpg: process.env.GPG,
      checkpoint: process.env.CHECKPOINT,
      cmmacAct: cmmacAct as 'argmax' | 'sample' | undefined,
      frames,
      load,
      json: true,
      dequeue: 'edf',
      view: 'agent',
      faultRate: 0,
      faultDurationS: 60,
      timing: false,
      filters: false,
      detector: 'none',
      oracleMaxRequests: 0,
    } as EvalArgs;
    // kais eval --seeds: the same runs and statistics
    const many = runEvalSeeds(a, seeds, (line) => {
      if (line.startsWith('seed ')) process.stderr.write(`load ${load} ${line}\n`);
    });
    const perSeed = (k: number, f: (r: EvalReport['results'][number]) => number) => many.runs.map((run) => f(run.results[k]));
    cells.loads[String(load)] = Object.fromEntries(
      pairs.map((p, k) => [
        p,
        {
          rate: perSeed(k, (r) => r.throughputRate),
          replicaS: perSeed(k, (r) => r.replicaSeconds),
          ops: perSeed(k, (r) => r.schedulingCost),
        },
      ]),
    );
    // from the unrounded per-seed figures (the summary's are rounded to 4 decimals), as before
    const at = cells.loads[String(load)];
    const refRates = at[ref].rate;
    for (const p of pairs) {
      const v = at[p].rate;
      const paired = refRates.map((x, i) => x / v[i]);
      const ratio = p === ref ? '' : `${mean(paired).toFixed(3)} (${se(paired).toFixed(3)})`;
      console.log(
        `| ${load}x | ${p} | ${mean(v).toFixed(3)} (${se(v).toFixed(3)}) | ${ratio} | ${Math.round(mean(at[p].replicaS)).toLocaleString('en-US')} | ${Math.round(mean(at[p].ops)).toLocaleString('en-US')} |`,
      );
    }
  }
  if (process.env.JSON_OUT) fs.writeFileSync(process.env.JSON_OUT, JSON.stringify(cells) + '\n');
}

main().catch((e) => {
  process.stderr.write(`seed-table: ${(e as Error).message}\n`);
  process.exit(e instanceof UsageError ? 2 : 1);
});
