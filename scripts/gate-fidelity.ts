/**
 * What the weight gate's replay measures (docs/safe-learning.md, "What the gate's replay measures"):
 * for every frame of a cmmac/gpg episode on `kais` (P4, the shipped GPG), the gate's shadow
 * evaluation of a candidate against the shipped actor on the frame's last SECONDS of arrivals, on
 * four replays: every arrival (the live load) or a seeded quarter of them (what the gate gets with
 * `--experience explored` at `--explore 0.25`, kais up's default), each on the scenario's initial
 * placement (what the gate replayed on before session 49) or on the placement of that frame (what
 * the agents dispatched on). Prints each frame's verdicts, then per replay the verdict counts and
 * the mean candidate - current.
 *
 *   npm run build && LOAD=1 SEEDS=901,902 FRAMES=8 [CAND=models/kais-cmmac-drawn.bin] [SECONDS=10] [MARGIN=0.01] \
 *     node dist/scripts/gate-fidelity.js
 *
 * CAND absent: the shipped actor against itself (a rejection is the heuristic clause's, on an equal version).
 */
import type { Placement } from '../shared/domain';
import type { OrchestrationView } from '../shared/policy';
import { loadScenario } from '../shared/scenario';
import { Rng } from '../shared/rng';
import { placementOf } from '../shared/orchestration/placement';
import { defaultModelPath, readActorFile } from '../shared/nets/actor-file';
import { loadGpgOrchestration } from '../critic/gpg/load';
import { buildRequests } from '../training/workload';
import { runEpisode } from '../training/jobs/rollout';
import { shadowEvaluate } from '../training/jobs/gate';
import { policyByName } from './policy-by-name';

const env = (k: string, d: string) => process.env[k] ?? d;
const sc = loadScenario('kais');
const load = Number(env('LOAD', '1'));
const seeds = env('SEEDS', '901').split(',').map(Number);
const frames = Number(env('FRAMES', '8'));
const seconds = Number(env('SECONDS', '10'));
const margin = Number(env('MARGIN', '0.01'));
const candFile = process.env.CAND ?? null;
if (![load, frames, seconds, margin].every(Number.isFinite) || seeds.some((s) => !Number.isInteger(s)) || frames < 2) {
  console.error('gate-fidelity: LOAD, SEEDS (a,b,...), FRAMES (>= 2), SECONDS and MARGIN must be numbers');
  process.exit(2);
}
const shipped = readActorFile(defaultModelPath(sc)!);
const current = { version: 1, head: shipped.head, arrays: shipped.tensors };
const c = candFile ? readActorFile(candFile) : null;
const candidate = c ? { version: 2, head: c.head, arrays: c.tensors } : current;
const frameS = sc.slotS * sc.slotsPerFrame;
type Verdict = 'pass' | 'current' | 'heuristic';
const tally = new Map<string, { n: number; pass: number; current: number; heuristic: number; diff: number }>();

for (const seed of seeds) {
  const requests = buildRequests({ scenario: sc, workload: 'p4', seed, load, durationS: frames * frameS });
  const gpg = loadGpgOrchestration('models/kais-gpg.json', sc, 'gate-fidelity');
  // the placement of every frame: what the view holds at each decision (frame i's at the decision ending it)
  const placements: Placement[] = [];
  const decide = gpg.decide.bind(gpg);
  gpg.decide = (v: OrchestrationView) => {
    placements.push(placementOf(v));
    return decide(v);
  };
  const episode = runEpisode({
    scenario: sc,
    requests,
    frames,
    seed,
    dispatch: policyByName('cmmac', sc),
    orchestration: gpg,
    nodeDequeue: 'edf',
  });
  gpg.dispose();
  for (let i = 1; i < placements.length; i++) {
    const end = (i + 1) * frameS;
    const all = requests
      .filter((q) => q.arrivalS >= end - seconds && q.arrivalS < end)
      .map((q) => ({ eap: q.eap, service: q.service, slot: Math.floor(q.arrivalS / sc.slotS) }));
    const rng = new Rng(seed * 100 + i);
    const quarter = all.filter(() => rng.next() < 0.25);
    const cells: string[] = [];
    for (const [arrivals, loadTag] of [
      [all, 'live load'],
      [quarter, 'quarter'],
    ] as const) {
      for (const placement of [null, placements[i]]) {
        const x = shadowEvaluate({
          scenario: sc,
          candidate,
          current,
          arrivals,
          heuristics: ['lec', 'round-robin'],
          seed: 1000 + i,
          seconds,
          placement,
        });
        const cur = x.current!;
        const v: Verdict =
          x.candidate < (1 - margin) * cur ? 'current' : x.candidate < (1 - margin) * x.heuristic.rate ? 'heuristic' : 'pass';
        const key = `${loadTag}, ${x.placement} placement`;
        const t = tally.get(key) ?? { n: 0, pass: 0, current: 0, heuristic: 0, diff: 0 };
        t.n++;
        t[v]++;
        t.diff += x.candidate - cur;
        tally.set(key, t);
        cells.push(`${key}: ${x.candidate.toFixed(3)} / ${cur.toFixed(3)} / ${x.heuristic.name} ${x.heuristic.rate.toFixed(3)} ${v}`);
      }
    }
    console.log(`seed ${seed} frame ${i} (episode ${episode.throughputPerFrame[i]}): ${cells.join(' | ')}`);
  }
}
console.log(
  `\ncandidate ${candFile ?? 'the shipped actor'} against the shipped actor, load ${load}, ${seconds} s replays, margin ${margin}`,
);
console.log('| replay | checks | pass | rejected: current | rejected: heuristic | mean candidate - current |');
console.log('| --- | --- | --- | --- | --- | --- |');
for (const [key, t] of tally)
  console.log(
    `| ${key} | ${t.n} | ${t.pass} | ${t.current} | ${t.heuristic} | ${(t.diff / t.n >= 0 ? '+' : '') + (t.diff / t.n).toFixed(4)} |`,
  );
