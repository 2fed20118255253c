/**
 * The train-only teachers as policies on the TEST conditions of docs/cmmac.md (kais, hpa, 5 frames,
 * seeds 2000-2002, p4 and the trace file given, discounted and edf), with the requests, seeds and
 * runEpisode of `kais eval` (which cannot run a train-only teacher). For reporting only, after the
 * choice: never use it to choose anything.
 *
 *   node dist/scripts/teacher-test-eval.js /tmp/trace-late.csv 'queue-lookahead;queue-lookahead-slack;{"ownWork":"deadline","queueWork":"deadline","margin":1,"busyFrac":0.25}'
 *   (a policy `db:<kais train output>@<frame>` is that run's actor at its newest checkpoint at or
 *   before the frame, argmax, as loadCmmacFromDb's maxFrame)
 */
import { loadScenario } from '../shared/scenario';
import type { DispatchPolicy } from '../shared/policy';
import { makeTrainTeacher } from '../critic/cmmac/teacher';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { buildRequests } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';
import { loadCmmacFromDb } from '../training/jobs/checkpoint';
import { QueueLookaheadDispatch } from '../critic/cmmac/queue-teacher';

function main(): void {
  const scenario = loadScenario('kais');
  const frames = 5;
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const trace = process.argv[2];
  // policies separated by ';' (a JSON object of QueueLookaheadOptions contains commas)
  const names = ['lec', 'jsq', ...(process.argv[3] ?? 'queue-lookahead').split(';')];
  const make = (n: string): DispatchPolicy => {
    const m = /^db:(.+)@(\d+)$/.exec(n);
    if (m) return loadCmmacFromDb(m[1], scenario, { maxFrame: Number(m[2]) });
    if (n.startsWith('{')) return new QueueLookaheadDispatch(JSON.parse(n));
    return makeTrainTeacher(n) ?? makeDispatch(n, scenario);
  };
  const cols: [string, string | null, 'discounted' | 'edf'][] = [
    ['p4/discounted', null, 'discounted'],
    ['trace/discounted', trace, 'discounted'],
    ['p4/edf', null, 'edf'],
    ['trace/edf', trace, 'edf'],
  ];
  console.log(['policy'.padEnd(28), ...cols.map((c) => c[0])].join(' '));
  for (const n of names) {
    const row: string[] = [];
    for (const [, tracePath, dq] of cols) {
      const v: number[] = [];
      for (const seed of [2000, 2001, 2002]) {
        const requests = buildRequests({ scenario, workload: 'p4', tracePath, seed, load: 1, durationS });
        v.push(runEpisode({ scenario, requests, frames, seed, dispatch: make(n), orchestration: makeOrchestration('hpa', scenario), eapDequeue: dq, nodeDequeue: dq }).throughputRate);
      }
      row.push(`${(v.reduce((a, b) => a + b, 0) / v.length).toFixed(4)} [${v.join(' ')}]`);
    }
    console.log([n.padEnd(28), ...row].join(' '));
  }
}

main();
