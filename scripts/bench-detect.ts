/**
 * Device-filter benchmark figures for scripts/bench.ts (DESIGN.md §5): `detect.rulesUsPerWindow`
 * (one DeviceFilter.push with N = 4 metrics, i.e. one window decision, in µs) and
 * `detect.rulesUsPerWindowN38` (the same with N = 38 metrics, SMD's width, and the rule settings
 * `kais detect` uses: level evidence, faulty margin; the correlation rule makes it O(T N^2)),
 * `detect.rulesCpuUsPerWindow` and `detect.rulesCpuUsPerWindowN38` (the same runs' CPU time per
 * push: what the rules cost, without the time other processes held the core on a shared machine),
 * `detect.learnedUsPerWindow` (batched VGRU scoring of 12x4 windows, µs per window, after a tiny
 * training). Synthetic seeded data, so no data folder is needed. The caller picks the tfjs backend
 * (shared/tf-backend.ts) before calling, as an entry point.
 */
import { DeviceFilter, baselineFromHistory } from '../agent/filters/device-filter';
import { VgruDetector } from '../critic/detector/vgru';
import { Rng } from '../shared/rng';
import { DETECT_RULE_DEFAULTS } from '../training/jobs/detect';

export interface BenchResult {
  name: string;
  value: number;
  unit: string;
}

const N = 4;
const T = 12;

function series(rows: number, seed: number, N = 4): Float64Array {
  const rng = new Rng(seed);
  const out = new Float64Array(rows * N);
  let load = 0;
  for (let r = 0; r < rows; r++) {
    load = 0.9 * load + 0.3 * rng.normal();
    for (let n = 0; n < N; n++) out[r * N + n] = 0.5 + 0.1 * load + 0.02 * rng.normal() + (r % 5000 > 4900 ? rng.normal() : 0);
  }
  return out;
}

/** CPU time (user + system) of this process since `c0`, in µs: on a shared machine, wall time also counts the time other processes held the core. */
function cpuUs(c0: NodeJS.CpuUsage): number {
  const c = process.cpuUsage(c0);
  return c.user + c.system;
}

export function benchDetect(): BenchResult[] {
  // RULES: median of 5 runs of 50k pushes (a push after warm-up = one window verdict)
  const data = series(50_000, 1);
  const filter = new DeviceFilter(baselineFromHistory(series(5_000, 2), N));
  const sample = new Float64Array(N);
  const runs: number[] = [];
  const cpu: number[] = [];
  for (let rep = 0; rep < 5; rep++) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (let r = 0; r < 50_000; r++) {
      for (let n = 0; n < N; n++) sample[n] = data[r * N + n];
      filter.push(sample);
    }
    runs.push(Number(process.hrtime.bigint() - t0) / 1e3 / 50_000);
    cpu.push(cpuUs(c0) / 50_000);
  }
  runs.sort((a, b) => a - b);
  cpu.sort((a, b) => a - b);
  // RULES with N = 38 and the kais detect settings: median of 5 runs of 10k pushes
  const N38 = 38;
  const data38 = series(10_000, 3, N38);
  const filter38 = new DeviceFilter(baselineFromHistory(series(5_000, 4, N38), N38, DETECT_RULE_DEFAULTS), DETECT_RULE_DEFAULTS);
  const sample38 = new Float64Array(N38);
  const runs38: number[] = [];
  const cpu38: number[] = [];
  for (let rep = 0; rep < 5; rep++) {
    const t0 = process.hrtime.bigint();
    const c0 = process.cpuUsage();
    for (let r = 0; r < 10_000; r++) {
      for (let n = 0; n < N38; n++) sample38[n] = data38[r * N38 + n];
      filter38.push(sample38);
    }
    runs38.push(Number(process.hrtime.bigint() - t0) / 1e3 / 10_000);
    cpu38.push(cpuUs(c0) / 10_000);
  }
  runs38.sort((a, b) => a - b);
  cpu38.sort((a, b) => a - b);
  // LEARNED: batched scoring of 2048 windows with a briefly trained default-size detector
  const count = 2048;
  const w = Float32Array.from({ length: count * T * N }, (_, i) => data[i % data.length]);
  const det = new VgruDetector(N, T, { steps: 5 });
  let learnedUs: number;
  try {
    det.fit(w.subarray(0, 512 * T * N), 512);
    det.score(w, 64); // warm-up
    const t0 = process.hrtime.bigint();
    det.score(w, count);
    learnedUs = Number(process.hrtime.bigint() - t0) / 1e3 / count;
  } finally {
    det.dispose();
  }
  return [
    { name: 'detect.rulesUsPerWindow', value: Math.round(runs[2] * 1000) / 1000, unit: 'us' },
    { name: 'detect.rulesUsPerWindowN38', value: Math.round(runs38[2] * 1000) / 1000, unit: 'us' },
    { name: 'detect.rulesCpuUsPerWindow', value: Math.round(cpu[2] * 1000) / 1000, unit: 'us' },
    { name: 'detect.rulesCpuUsPerWindowN38', value: Math.round(cpu38[2] * 1000) / 1000, unit: 'us' },
    { name: 'detect.learnedUsPerWindow', value: Math.round(learnedUs * 100) / 100, unit: 'us' },
  ];
}
