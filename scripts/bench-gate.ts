/**
 * Times the weight gate's shadow evaluation on `kais` (issue 17: at most 10 s per version, the
 * hub's event loop unaffected): the default gate config (10 s of the newest arrivals, lec and
 * round-robin), arrivals from 25 s of p4 at load 1 as the agents would send them, candidate =
 * random weights (rejected, stopped early after 2 episodes) or, with `shipped`, the shipped model
 * itself (passes: all 4 episodes, the most a check runs); current = the shipped model.
 * Per check: wall time, the worker's own time, and the largest gap between 20 ms ticks of this
 * thread's event loop while it ran.
 *
 *   npm run build && node dist/scripts/bench-gate.js [checks=3] [random|shipped]
 */
import { DEFAULT_GATE, WeightGate } from '../orchestrator/gate';
import { initActorWeights } from '../shared/nets/actor';
import { defaultModelPath, readActorFile } from '../shared/nets/actor-file';
import { loadScenario, topologyOf } from '../shared/scenario';
import { observationDim } from '../shared/spaces';
import { buildRequests } from '../training/workload';

async function main(): Promise<void> {
  const checks = Number(process.argv[2] ?? 3);
  const candidate = process.argv[3] ?? 'random';
  if (candidate !== 'random' && candidate !== 'shipped') {
    console.error(`bench-gate: the candidate must be random or shipped, got ${candidate}`);
    process.exit(2);
  }
  const kais = loadScenario('kais');
  const topo = topologyOf(kais);
  const A = topo.numNodes + 1;
  const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });
  const gate = new WeightGate({ config: DEFAULT_GATE, scenario: kais });
  await gate.ready();
  const reqs = buildRequests({ scenario: kais, workload: 'p4', seed: 5, load: 1, durationS: 25 });
  for (let e = 0; e < kais.eaps.length; e++) {
    const mine = reqs.filter((r) => r.eap === e);
    gate.observe({
      eap: e,
      transitions: mine.map((r) => ({
        eap: e,
        slot: Math.floor(r.arrivalS / kais.slotS),
        service: r.service,
        obs: new Float32Array(0),
        mask: new Uint8Array(0),
        action: 0,
        logProb: 0,
        reward: 0,
        latencyMs: null,
        metDeadline: false,
        done: false,
        weightVersion: null,
      })),
    });
  }
  const shipped = readActorFile(defaultModelPath(kais)!);
  for (let i = 0; i < checks; i++) {
    let maxGap = 0;
    let last = performance.now();
    const tick = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 20);
    const t0 = performance.now();
    const v = await gate.check(
      candidate === 'shipped'
        ? { version: 2 + i, head: shipped.head, arrays: shipped.tensors }
        : { version: 2 + i, head: 'relu1', arrays: initActorWeights(D, A, 100 + i) },
      { version: 1, head: shipped.head, arrays: shipped.tensors },
    );
    const wall = performance.now() - t0;
    clearInterval(tick);
    console.log(
      `check ${i + 1}: wall ${(wall / 1000).toFixed(2)} s, worker ${(v.numbers!.ms / 1000).toFixed(2)} s, ${v.numbers!.requests} arrivals replayed, event-loop max gap ${maxGap.toFixed(0)} ms; ${v.pass ? 'pass' : 'reject'}: ${v.reason}`,
    );
  }
  gate.dispose();
}

void main();
