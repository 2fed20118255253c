/**
 * The device filters in the simulator with and without NodeHealth's L2 second stage (issue 20 item
 * 5; docs/detect.md "Live"): requests lost to failed nodes and the share of healthy node-time held
 * out, for no filters, the rules alone, and the rules + the L2 stage (LIVE_STAGE_COMBINATION), on
 * `kais` at the v2017 server-event failure times (seeds 1-3) and with Poisson failures (the
 * telemetry test's seed 4), both views, lec/hpa and jsq/hpa.
 *
 *   node dist/scripts/sim-second-stage.js [path/to/v2017_server_event.csv]
 *
 * Prints a markdown table. About a minute per seed on a quiet core.
 */
import * as path from 'path';
import { loadScenario, topologyOf } from '../shared/scenario';
import { makeDispatch, makeOrchestration } from '../training/baselines/registry';
import { runEpisode } from '../training/jobs/rollout';
import { faultsFromRate, faultsFromServerEvents, type Fault } from '../training/sim/faults';
import { buildRequests } from '../training/workload';

const scenario = loadScenario('kais');
const events = process.argv[2] ?? path.resolve(__dirname, '../../../shared/data/alibaba/v2017_server_event.csv');
const N = topologyOf(scenario).numNodes;

const runs: { label: string; seed: number; frames: number; faults: Fault[] }[] = [];
for (const seed of [1, 2, 3]) runs.push({ label: 'v2017', seed, frames: 20, faults: faultsFromServerEvents(events, N, 500, 60) });
runs.push({ label: 'Poisson', seed: 4, frames: 12, faults: faultsFromRate(N, 300, 1 / 1800, 60, 4) });

const pct = (x: number | null): string => (x === null ? '-' : `${(100 * x).toFixed(2)}%`);
console.log('| failures, seed, view | policy | lost: no filters / rules / rules + L2 | healthy node-time held out: rules / rules + L2 |');
console.log('| --- | --- | --- | --- |');
for (const r of runs) {
  const durationS = r.frames * scenario.slotsPerFrame * scenario.slotS;
  const requests = buildRequests({ scenario, workload: 'p4', seed: r.seed, load: 1, durationS });
  for (const view of ['agent', 'global'] as const) {
    for (const policy of ['lec', 'jsq']) {
      const one = (deviceFilters: boolean, secondStage: boolean) =>
        runEpisode({
          scenario,
          requests,
          frames: r.frames,
          seed: r.seed,
          dispatch: makeDispatch(policy, scenario),
          orchestration: makeOrchestration('hpa', scenario),
          faults: r.faults,
          deviceFilters,
          secondStage,
          view,
        });
      const none = one(false, false);
      const rules = one(true, false);
      const l2 = one(true, true);
      console.log(
        `| ${r.label}, ${r.seed}, ${view} | ${policy}/hpa | ${none.lostToFailedNodes} / ${rules.lostToFailedNodes} / ${l2.lostToFailedNodes} | ${pct(rules.falseExclusionRate)} / ${pct(l2.falseExclusionRate)} |`,
      );
    }
  }
}
