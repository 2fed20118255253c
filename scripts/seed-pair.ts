/**
 * Pairs the per-seed figures of several seed-table.ts runs (their JSON_OUT files) on the same
 * scenario, seeds and frames: each pair's mean throughput rate (s.e.), the reference's per-seed
 * paired ratio to it, and against the best of the heuristic pairs (the pair with the highest mean,
 * among those whose dispatch and orchestration are both heuristics), the reference's ratio and its
 * replica-seconds share. A learned pair run in one process and the heuristics in another (cheap)
 * are then compared seed by seed, as if run together (the simulator is deterministic per seed).
 *
 *   REF=cmmac/gpg node dist/scripts/seed-pair.js learned.json heuristics.json
 *
 * A pair named in two files must have the same numbers in both (checked: a check that the runs
 * were made on the same simulator); files of other seeds, frames, traces or scenarios are refused.
 */
import * as fs from 'node:fs';
import { mean, se, type SeedCells } from './seed-stats';

// learned pairs and the hindsight bound are not heuristic pairs (the bar compares against the best of those)
const LEARNED = /(^|[/+])(cmmac|gpg|hindsight)($|[/+])/;

function main(): void {
  const files = process.argv.slice(2);
  const ref = process.env.REF;
  if (files.length === 0 || !ref) {
    process.stderr.write('seed-pair: REF=<pair> node dist/scripts/seed-pair.js <seed-table JSON_OUT file>...\n');
    process.exit(2);
  }
  const runs = files.map((f) => ({ f, c: JSON.parse(fs.readFileSync(f, 'utf8')) as SeedCells }));
  const first = runs[0].c;
  for (const { f, c } of runs)
    if (
      c.scenario !== first.scenario ||
      c.frames !== first.frames ||
      (c.trace ?? null) !== (first.trace ?? null) ||
      JSON.stringify(c.seeds) !== JSON.stringify(first.seeds)
    ) {
      process.stderr.write(`seed-pair: ${f}: scenario, frames, trace or seeds differ from ${runs[0].f}\n`);
      process.exit(2);
    }
  const loads = [...new Set(runs.flatMap(({ c }) => Object.keys(c.loads)))].sort((a, b) => Number(a) - Number(b));
  const seeds = first.seeds;
  console.log(
    `${first.scenario}${first.trace ? `, trace ${first.trace}` : ''}, seeds ${seeds[0]}..${seeds[seeds.length - 1]} (${seeds.length}), ${first.frames} frames; ratio: ${ref} / pair`,
  );
  console.log('');
  console.log(`| load | pair | throughput (s.e.) | ${ref} / pair (paired s.e.) | replica-s | ${ref} replica-s / pair's | operations |`);
  console.log('| --- | --- | --- | --- | --- | --- | --- |');
  for (const load of loads) {
    const cells = new Map<string, { rate: number[]; replicaS: number[]; ops: number[] }>();
    for (const { f, c } of runs)
      for (const [pair, v] of Object.entries(c.loads[load] ?? {})) {
        const had = cells.get(pair);
        if (had && JSON.stringify(had.rate) !== JSON.stringify(v.rate)) {
          process.stderr.write(`seed-pair: ${f}: ${pair} at load ${load} differs from another file's: not the same simulator\n`);
          process.exit(2);
        }
        cells.set(pair, v);
      }
    const r = cells.get(ref);
    if (!r) {
      process.stderr.write(`seed-pair: no ${ref} at load ${load}\n`);
      continue;
    }
    const heuristics = [...cells.keys()].filter((p) => !LEARNED.test(p));
    const best = heuristics.sort((a, b) => mean(cells.get(b)!.rate) - mean(cells.get(a)!.rate))[0];
    const order = [ref, ...(best ? [best] : []), ...[...cells.keys()].filter((p) => p !== ref && p !== best)];
    for (const p of order) {
      const v = cells.get(p)!;
      const paired = r.rate.map((x, i) => x / v.rate[i]);
      const ratio = p === ref ? '' : `${mean(paired).toFixed(3)} (${se(paired).toFixed(3)})`;
      const name = p === best ? `${p} (best heuristic pair)` : p;
      const share = p === ref ? '' : (mean(r.replicaS) / mean(v.replicaS)).toFixed(2);
      console.log(
        `| ${load}x | ${name} | ${mean(v.rate).toFixed(3)} (${se(v.rate).toFixed(3)}) | ${ratio} | ${Math.round(mean(v.replicaS)).toLocaleString('en-US')} | ${share} | ${Math.round(mean(v.ops)).toLocaleString('en-US')} |`,
      );
    }
  }
}

main();
