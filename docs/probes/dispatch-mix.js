/**
 * A probe (session 50, docs/gpg.md "A dispatcher mix and a per-request signal"): each request's
 * dispatcher is drawn among ARMS with weights W (per request, seeded), on the shipped GPG's
 * placement (or ORCH), as kais eval runs a pair (agent view, EDF). Prints the run's throughput rate
 * per seed and their mean, then each arm's own in-time rate (its requests only).
 *
 *   npm run build
 *   TRACE=v25.csv LOAD=1.5 SEEDS=901,902,903 W=1,1,1 node docs/probes/dispatch-mix.js
 *   (TRACE unset: P4 arrivals; ARMS default lec,p2c,round-robin; FRAMES default 10)
 */
/* eslint-disable @typescript-eslint/no-require-imports */
const path = require('node:path');
const D = path.join(__dirname, '..', '..', 'dist');
const { loadScenario } = require(`${D}/shared/scenario`);
const { buildRequests } = require(`${D}/training/workload`);
const { makeAnyOrchestration } = require(`${D}/training/jobs/eval`);
const { makeHeuristicDispatch } = require(`${D}/shared/dispatch/index`);
const { EdgeCloudEnv } = require(`${D}/training/sim/env`);
const { Rng } = require(`${D}/shared/rng`);

const scenario = loadScenario('kais');
const ARMS = (process.env.ARMS || 'lec,p2c,round-robin').split(',');
const W = (process.env.W || ARMS.map(() => 1).join(',')).split(',').map(Number);
const total = W.reduce((a, b) => a + b, 0);
const cum = [];
W.reduce((a, w, i) => (cum[i] = a + w / total), 0);
const frames = Number(process.env.FRAMES || 10);
const load = Number(process.env.LOAD || 1.5);
const seeds = (process.env.SEEDS || '901').split(',').map(Number);
const trace = process.env.TRACE || null;

const perArm = ARMS.map(() => [0, 0]);
const rates = [];
for (const seed of seeds) {
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const requests = buildRequests({ scenario, workload: 'p4', tracePath: trace, seed, load, durationS });
  const orch = makeAnyOrchestration(process.env.ORCH || 'gpg', scenario, undefined);
  const env = new EdgeCloudEnv(scenario, {
    requests,
    frames,
    orchestration: orch,
    nodeDequeue: 'edf',
    illegalAction: 'throw',
    agentViews: true,
    seed,
  });
  const arms = ARMS.map((a) => makeHeuristicDispatch(a, scenario));
  let { observations } = env.reset({ seed });
  for (const p of arms) p.reset?.(seed, env.view);
  const rng = new Rng(seed * 7 + 1);
  const armOf = new Int8Array(requests.length).fill(-1);
  const actions = new Array(env.possibleAgents.length).fill(-1);
  while (!env.isDone) {
    for (const b of env.agents) {
      const item = observations[b];
      const u = rng.next();
      let k = 0;
      while (k < ARMS.length - 1 && u >= cum[k]) k++;
      armOf[item.request.id] = k;
      actions[b] = arms[k].decide(item, env.viewOf(b));
    }
    observations = env.step(actions).observations;
  }
  for (let i = 0; i < requests.length; i++) {
    const o = armOf[i] < 0 ? Number.NaN : env.requestOutcome(i);
    if (Number.isNaN(o)) continue;
    perArm[armOf[i]][0] += o;
    perArm[armOf[i]][1]++;
  }
  orch.dispose?.();
  rates.push(env.outcome.completedInTime / env.outcome.arrived);
}
const mean = rates.reduce((a, b) => a + b, 0) / rates.length;
console.log(`mean ${mean.toFixed(4)} (seeds ${rates.map((r) => r.toFixed(4)).join(' ')})`);
console.log(ARMS.map((a, k) => `${a}: its requests ${(perArm[k][0] / perArm[k][1]).toFixed(4)} in time (n ${perArm[k][1]})`).join('; '));
