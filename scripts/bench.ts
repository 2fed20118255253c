/**
 * `npm run bench [-- --json]`: the performance figures of DESIGN.md section 5.
 * Each figure is measured here, in one run, so ratios (e.g. cost per request from small to large)
 * compare like with like on this machine at this moment.
 *
 * Figures:
 *   sim.requestsPerSec.<scenario>     simulated requests per second, jsq/static, p4 workload
 *   sim.usPerRequest.<scenario>       the inverse, in microseconds
 *   sim.costGrowth.large/small        usPerRequest(large) / usPerRequest(small) over nodes(large) / nodes(small)
 *                                     (<= 1 means the cost per request grows at most linearly with cluster size)
 *   actor.decisionUs.p50|p99, lec.decisionUs.p99   scripts/bench-actor.ts
 *   detect.rulesUsPerWindow[N38], detect.rulesCpuUsPerWindow[N38], detect.learnedUsPerWindow   scripts/bench-detect.ts
 *   gpg.decisionMs.<kais|large|kais-shipped-H<h>>.p50|max   scripts/bench-gpg.ts
 *   dashboard.*                       scripts/bench-dashboard.ts (fan-out p99 with and without a dashboard viewer)
 * Optional modules (e.g. a hub fan-out bench) are added when their file exists.
 */
import { performance } from 'perf_hooks';
import { loadBackend } from '../shared/tf-backend';
import { loadScenario, topologyOf } from '../shared/scenario';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { runEpisode } from '../training/jobs/rollout';
import { buildRequests } from '../training/workload';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
}

function simSpeed(name: string, frames: number, repeats: number): { reqPerSec: number; nodes: number } {
  const scenario = loadScenario(name);
  const durationS = frames * scenario.slotsPerFrame * scenario.slotS;
  const requests = buildRequests({ scenario, workload: 'p4', seed: 1, load: 1, durationS });
  let best = Infinity;
  let arrived = 0;
  for (let r = 0; r < repeats; r++) {
    const t0 = performance.now();
    const res = runEpisode({
      scenario,
      requests,
      frames,
      seed: 1,
      dispatch: makeDispatch('jsq', scenario),
      orchestration: makeOrchestration('static', scenario),
    });
    const dt = performance.now() - t0;
    arrived = res.arrived;
    if (dt < best) best = dt;
  }
  return { reqPerSec: (arrived / best) * 1000, nodes: topologyOf(scenario).numNodes };
}

function optional(modulePath: string, fn: string): (() => BenchResult[] | Promise<BenchResult[]>) | null {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const m = require(modulePath) as Record<string, unknown>;
    return typeof m[fn] === 'function' ? (m[fn] as () => BenchResult[]) : null;
  } catch (e) {
    // only a module that is not there is optional; a broken one must show
    if ((e as NodeJS.ErrnoException).code === 'MODULE_NOT_FOUND' && String((e as Error).message).includes(modulePath.slice(2))) return null;
    throw e;
  }
}

async function main(): Promise<void> {
  const json = process.argv.includes('--json');
  const backend = await loadBackend(); // entry point: the detector bench needs a tfjs backend
  if (!json) process.stdout.write(`tfjs backend: ${backend}\n`);
  const results: BenchResult[] = [];
  // SIM: best of 3 runs (the machine is shared; the best run is the least disturbed one)
  const sims: Record<string, { reqPerSec: number; nodes: number }> = {};
  for (const [name, frames] of [
    ['small', 40],
    ['kais', 20],
    ['large', 8],
  ] as const) {
    sims[name] = simSpeed(name, frames, 3);
    results.push({ name: `sim.requestsPerSec.${name}`, value: Math.round(sims[name].reqPerSec), unit: 'req/s' });
    results.push({ name: `sim.usPerRequest.${name}`, value: +(1e6 / sims[name].reqPerSec).toFixed(3), unit: 'us' });
  }
  const growth = sims.small.reqPerSec / sims.large.reqPerSec / (sims.large.nodes / sims.small.nodes);
  results.push({ name: 'sim.costGrowth.large/small', value: +growth.toFixed(3), unit: 'ratio (<=1: at most linear)' });
  for (const [mod, fn] of [
    ['./bench-detect', 'benchDetect'],
    ['./bench-actor', 'benchActor'],
    ['./bench-gpg', 'benchGpg'],
    ['./bench-hub', 'benchHub'],
    ['./bench-dashboard', 'benchDashboard'],
  ] as const) {
    const f = optional(mod, fn);
    if (f) results.push(...(await f()));
  }
  if (json) process.stdout.write(JSON.stringify({ results }) + '\n');
  else for (const r of results) process.stdout.write(`${r.name.padEnd(44)} ${String(r.value).padStart(12)} ${r.unit}\n`);
}

main().catch((e) => {
  process.stderr.write(`bench: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
