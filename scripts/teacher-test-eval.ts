/**
 * The train-only teachers as policies on the TEST conditions of docs/cmmac.md (kais, hpa, 5 frames,
 * seeds 2000-2002, p4 and the trace file given, discounted and edf), with the requests, seeds and
 * runEpisode of `kais eval` (which cannot run a train-only teacher). For reporting only, after the
 * choice: never use it to choose anything.
 *
 *   node dist/scripts/teacher-test-eval.js /tmp/trace-late.csv 'queue-lookahead;queue-lookahead-slack;{"ownWork":"deadline","queueWork":"deadline","margin":1,"busyFrac":0.25}'
 *   (policies by name as scripts/policy-by-name.ts reads them; `db:<kais train output>@<frame>` is
 *   that run's actor at its newest checkpoint at or before the frame, argmax)
 */
import { loadScenario } from '../shared/scenario';
import { episodeRate } from './policy-by-name';

function main(): void {
  const scenario = loadScenario('kais');
  const trace = process.argv[2];
  // policies separated by ';' (a JSON object of QueueLookaheadOptions contains commas)
  const names = ['lec', 'jsq', ...(process.argv[3] ?? 'queue-lookahead').split(';')];
  const cols: [string, string | null, 'discounted' | 'edf'][] = [
    ['p4/discounted', null, 'discounted'],
    ['trace/discounted', trace, 'discounted'],
    ['p4/edf', null, 'edf'],
    ['trace/edf', trace, 'edf'],
  ];
  console.log(['policy'.padEnd(28), ...cols.map((c) => c[0])].join(' '));
  for (const n of names) {
    const row: string[] = [];
    for (const [, tracePath, dequeue] of cols) {
      const v = [2000, 2001, 2002].map((seed) => episodeRate(scenario, n, { frames: 5, seed, load: 1, tracePath, dequeue }));
      row.push(`${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(4)} [${v.join(' ')}]`);
    }
    console.log([n.padEnd(28), ...row].join(' '));
  }
}

main();
