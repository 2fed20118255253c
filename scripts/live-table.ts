/**
 * Live against predicted (issue 13's Must-show): `kais up --no-learn --json` for each load and
 * policy, one after the other, and a markdown table of live / predicted (the same requests in the
 * simulator, agent view, as `kais up` reports it), the live and predicted rankings per load, and
 * the per-target totals (edge nodes, cloud: expired and completed) where the two differ.
 *
 *   node dist/scripts/live-table.js                       # loads 0.8,1,1.3; lec,cmmac,jsq,p2c,round-robin,greedy; 60 s
 *   LOADS=1 POLICIES=lec,jsq DURATION=30 node dist/scripts/live-table.js
 *
 * Live figures need a quiet machine (the agents, nodes and orchestrator share its cores): each row
 * prints the 1-minute load average at its end. Run it under `nice -n -15` when something else runs.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';

interface Row {
  load: number;
  policy: string;
  live: number;
  predicted: number;
  ratio: number;
  loadAverage1m: number;
  edge: { live: Record<string, number>; predicted: Record<string, number> };
  cloud: { live: Record<string, number>; predicted: Record<string, number> };
}

function list(v: string | undefined, d: string): string[] {
  return (v ?? d).split(',').filter((s) => s.length > 0);
}

function run(load: number, policy: string, durationS: number): Row {
  const kais = path.join(__dirname, '..', 'kais.js');
  const args = [kais, 'up', '--duration', String(durationS), '--no-learn', '--policy', policy, '--load', String(load), '--json'];
  const r = spawnSync(process.execPath, args, { encoding: 'utf8', maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(`kais up --policy ${policy} --load ${load} exited ${r.status}: ${r.stderr.split('\n').slice(-3).join(' ')}`);
  const s = JSON.parse(r.stdout) as {
    throughputRate: number;
    evalThroughputRate: number;
    vsEval: number;
    loadAverage1m: number;
    perTarget: { target: string; live: Record<string, number>; predicted: Record<string, number> }[] | null;
  };
  const add = (into: Record<string, number>, from: Record<string, number>) => {
    for (const [k, v] of Object.entries(from)) into[k] = (into[k] ?? 0) + v;
  };
  const edge = { live: {}, predicted: {} };
  const cloud = { live: {}, predicted: {} };
  for (const t of s.perTarget ?? []) {
    const into = t.target === 'cloud' ? cloud : edge;
    add(into.live, t.live);
    add(into.predicted, t.predicted);
  }
  return {
    load,
    policy,
    live: s.throughputRate,
    predicted: s.evalThroughputRate,
    ratio: s.vsEval,
    loadAverage1m: s.loadAverage1m,
    edge,
    cloud,
  };
}

function main(): void {
  const loads = list(process.env.LOADS, '0.8,1,1.3').map(Number);
  const policies = list(process.env.POLICIES, 'lec,cmmac,jsq,p2c,round-robin,greedy');
  const durationS = Number(process.env.DURATION ?? 60);
  if (loads.some((l) => !(l > 0)) || !(durationS > 0))
    throw new Error('LOADS must be positive numbers, DURATION a positive number of seconds');
  const rows: Row[] = [];
  console.log('| load | policy | live | predicted | live / predicted | edge expired live / pred | cloud expired live / pred | load avg |');
  console.log('| --- | --- | --- | --- | --- | --- | --- | --- |');
  for (const load of loads) {
    for (const policy of policies) {
      const r = run(load, policy, durationS);
      rows.push(r);
      console.log(
        `| ${load} | ${policy} | ${r.live.toFixed(3)} | ${r.predicted.toFixed(3)} | ${r.ratio.toFixed(3)} | ${r.edge.live.expired ?? '-'} / ${r.edge.predicted.expired ?? '-'} | ${r.cloud.live.expired ?? '-'} / ${r.cloud.predicted.expired ?? '-'} | ${r.loadAverage1m} |`,
      );
    }
  }
  for (const load of loads) {
    const at = rows.filter((r) => r.load === load);
    const rank = (k: 'live' | 'predicted') => [...at].sort((a, b) => b[k] - a[k]).map((r) => r.policy);
    console.log(`load ${load}: live ranking ${rank('live').join(' > ')}; predicted ${rank('predicted').join(' > ')}`);
  }
  const within = rows.filter((r) => r.ratio >= 0.97 && r.ratio <= 1.03).length;
  console.log(`${within} of ${rows.length} rows within 0.97-1.03`);
}

main();
