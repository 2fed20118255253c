/**
 * Writes the built-in scenario files shared/scenarios/{tiny,small,kais,large}.json.
 * Run once after changing a formula here: `npm run build && node dist/scripts/make-scenarios.js`.
 * The JSON files are the source of truth at run time; this script only records how they were made.
 */
import * as fs from 'fs';
import * as path from 'path';

// Node shapes cycle through the paper's edge nodes: 1-2 vCPU, 2-4 GB.
const NODE_SHAPES = [
  { cpuCores: 2, memGB: 4 },
  { cpuCores: 1, memGB: 2 },
  { cpuCores: 2, memGB: 2 },
  { cpuCores: 1, memGB: 4 },
];

function services(count: number) {
  // cpuCores alternates 0.5 / 1 core; memory spreads over 0.25..1 GB with a stride so that CPU and
  // memory size are not correlated; popularity decays gently (Zipf-like exponent 0.5); work varies 0.5x..2x.
  return Array.from({ length: count }, (_, w) => ({
    cpuCores: w % 2 === 0 ? 0.5 : 1,
    memGB: Math.round((0.25 + 0.75 * (((w * 7) % count) / Math.max(1, count - 1))) * 100) / 100,
    weight: Math.round((1 / Math.sqrt(1 + w)) * 1000) / 1000,
    workScale: Math.round(Math.pow(2, (((w * 11) % count) / Math.max(1, count - 1)) * 2 - 1) * 100) / 100,
  }));
}

function eaps(nodeCounts: number[]) {
  let k = 0;
  return nodeCounts.map((n) => ({ nodes: Array.from({ length: n }, () => ({ ...NODE_SHAPES[k++ % NODE_SHAPES.length] })) }));
}

const network = {
  deviceToEap: { latencyMs: 20, mbps: 50 },
  eapToOwnNode: { latencyMs: 2, mbps: 1000 },
  eapToOtherNode: { latencyMs: 8, mbps: 1000 },
  edgeToCloud: { latencyMs: 100, mbps: 100 },
};

function scenario(name: string, description: string, nodeCounts: number[], numServices: number, cloudVms: number, ratePerS: number) {
  return {
    name,
    description,
    slotS: 0.25,
    slotsPerFrame: 100,
    scaleNodesPerFrame: 2,
    eaps: eaps(nodeCounts),
    cloud: { vms: cloudVms, vcpuPerVm: 4, memGBPerVm: 16 },
    network,
    services: services(numServices),
    replicaStartupS: 5,
    initialReplicasPerEap: 1,
    maxReplicasPerService: Math.max(4, Math.round((nodeCounts.reduce((a, b) => a + b, 0) * 2) / 3)),
    queueCapPerReplica: 8,
    workload: { ratePerS, inputMB: 0.5, deadlineBaseS: 0.4, deadlineSlack: 4 },
  };
}

const out = path.join(__dirname, '..', '..', 'shared', 'scenarios');
const all = [
  scenario('tiny', '1 eAP x 3 nodes, 4 services: for tests', [3], 4, 1, 18),
  scenario('small', '2 eAPs x 4 nodes, 8 services', [4, 4], 8, 4, 95),
  scenario('kais', "the KaiS paper's default: 5 eAPs x 8 nodes, 30 services, 15-VM cloud", [8, 8, 8, 8, 8], 30, 15, 521),
  scenario(
    'large',
    '10 eAPs with 3-15 heterogeneous nodes each, 100 nodes, 30 services',
    [3, 5, 7, 9, 11, 13, 15, 15, 12, 10],
    30,
    30,
    1242,
  ),
];
for (const s of all) fs.writeFileSync(path.join(out, `${s.name}.json`), JSON.stringify(s, null, 2) + '\n');
console.log(`wrote ${all.map((s) => s.name).join(', ')} to ${out}`);
