/**
 * `kais eval` through the real CLI (dist/kais.js, built by `npm test` before jest runs).
 */
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { fullDiskWritePreload } from '../../../support/full-disk';
import { tmpDir } from '../../../support/tmp';

const ROOT = path.resolve(__dirname, '../../../..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');
const DATA = path.resolve(ROOT, '..', 'shared', 'data', 'alibaba');
const tmp = tmpDir('kais-eval-');

function kais(...args: string[]) {
  const r = spawnSync(process.execPath, [KAIS, ...args], { encoding: 'utf8', timeout: 120000 });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/**
 * `kais ...args` as kais() does, without blocking: the long cmmac runs below are independent
 * processes, so they run side by side on the machine's cores (at most that many at once; jest
 * runs two test files at a time, jest.config.js). Same processes, same outputs, same checks as one by one.
 * The timeout is per process and counts from its start (a queued run waits without it).
 */
const CORES = Math.max(1, os.availableParallelism());
let runningNow = 0;
const waiting: (() => void)[] = [];
async function kaisAsync(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  if (runningNow >= CORES) await new Promise<void>((go) => waiting.push(go));
  runningNow++;
  try {
    return await new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [KAIS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], timeout: 240000 });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('error', reject);
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  } finally {
    runningNow--;
    waiting.shift()?.();
  }
}

function expectUsageError(r: { code: number | null; stderr: string }, pattern: RegExp) {
  expect(r.code).toBe(2);
  const lines = r.stderr.trim().split('\n');
  expect(lines).toHaveLength(1);
  expect(lines[0]).toMatch(pattern);
  expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
}

interface CmmacStaticReport {
  cmmacAct?: string;
  slotS: number;
  results: {
    policy: string;
    arrived: number;
    throughputRate: number;
    cloudShare: number;
    completedInTime: number;
    meanLatencyMs: number;
  }[];
}

/**
 * One frame of kais, cmmac/static and lec/static, JSON. The run without extra options is the same
 * command for the --cmmac-act test (argmax, the default) and the --slot test (the scenario's slot):
 * it runs once and both read its report.
 */
let cmmacStaticDefault: Promise<CmmacStaticReport> | null = null;
function cmmacStatic(...extra: string[]): Promise<CmmacStaticReport> {
  const go = async () => {
    const r = await kaisAsync('eval', '--scenario', 'kais', '--frames', '1', '--policies', 'cmmac/static,lec/static', '--json', ...extra);
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as CmmacStaticReport;
  };
  if (extra.length > 0) return go();
  return (cmmacStaticDefault ??= go());
}

describe('kais eval', () => {
  it('prints byte-identical JSON for the same seed, and the invariant holds for every policy (the shipped cmmac/gpg and cmmac/hpa among them)', async () => {
    // 3 frames: every default pair runs, GPG decides at 3 frame boundaries and hpa every 15 s (10
    // frames until session 32 and 4 until session 54 checked nothing more: 4 frames took 36 s a
    // process alone, 56 s in the suite)
    const args = ['eval', '--scenario', 'kais', '--workload', 'p4', '--seed', '7', '--frames', '3', '--json'];
    // two separate processes, side by side (about 27 s each on one core, half of it the two cmmac pairs)
    const [a, b] = await Promise.all([kaisAsync(...args), kaisAsync(...args)]);
    expect(a.code).toBe(0);
    expect(a.stdout).toBe(b.stdout);
    const report = JSON.parse(a.stdout);
    expect(report).toMatchObject({ scenario: 'kais', workload: 'p4', trace: null, seed: 7, frames: 3 });
    expect(report.results.length).toBeGreaterThanOrEqual(10);
    // the shipped models run by default: cMMAC on hpa and with the shipped GPG (models/kais-gpg.json)
    expect(report.results.map((r: { policy: string }) => r.policy).slice(0, 2)).toEqual(['cmmac/gpg', 'cmmac/hpa']);
    for (const r of report.results) {
      expect(r.arrived).toBe(r.completedInTime + r.late + r.dropped + r.queuedAtEnd);
      expect(r.throughputRate).toBeCloseTo(r.completedInTime / r.arrived, 4);
    }
  }, 300_000);

  it('stresses the kais cluster at the default load: best pair between 0.70 and 0.90 (calibrated to 0.80 on seeds 1-3), random/static clearly below it, the oracle above all', () => {
    const r = kais(
      'eval',
      '--scenario',
      'kais',
      '--seed',
      '1',
      '--frames',
      '20',
      '--json',
      '--policies',
      'random/static,jsq/hpa,jsq/static,lec/hpa,p2c/hpa',
    );
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    const res: { policy: string; throughputRate: number }[] = report.results;
    const by = Object.fromEntries(res.map((x) => [x.policy, x.throughputRate]));
    const best = Math.max(...res.map((x) => x.throughputRate));
    expect(best).toBeGreaterThanOrEqual(0.7);
    expect(best).toBeLessThanOrEqual(0.9);
    expect(by['random/static']).toBeLessThan(best - 0.1);
    expect(report.oracle.throughputRate).toBeGreaterThanOrEqual(best);
  });

  it('prints a readable table without --json and writes an SVG plot', () => {
    const plot = path.join(tmp, 'p.svg');
    const r = kais('eval', '--scenario', 'tiny', '--frames', '2', '--policies', 'jsq/static,lec/hpa', '--plot', plot);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^scenario tiny/);
    expect(r.stdout).toMatch(/policy\s+throughput/);
    expect(r.stdout).toMatch(/lec\/hpa/);
    expect(r.stdout).toMatch(/cost\s+replica-s/);
    const svg = fs.readFileSync(plot, 'utf8');
    expect(svg).toMatch(/<svg/);
    expect(svg).toMatch(/jsq\/static/);
    expect(svg).toMatch(/replicaSeconds/); // the second chart: throughput against replica-seconds
    expect(r.stdout.trimEnd().split('\n').pop()).toBe(`wrote ${plot}`);
  });

  it('with --json and --plot: JSON alone on stdout, one "wrote" line on stderr, every policy of 13 in its own colour', () => {
    const plot = path.join(tmp, 'p13.svg');
    const policies =
      'lec/hpa,cmmac/hpa,p2c/hpa,lec/static,lec/gsp-ss,jsq/static,prob/hpa,round-robin/hpa,greedy/gsp-ss,greedy/hpa,jsq/hpa,random/static,onsocmax/hpa';
    const r = kais('eval', '--scenario', 'kais', '--frames', '1', '--json', '--policies', policies, '--plot', plot);
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).results).toHaveLength(13);
    expect(r.stderr.split('\n').filter((l) => l.startsWith('wrote '))).toEqual([`wrote ${plot}`]);
    const svg = fs.readFileSync(plot, 'utf8');
    const lines = [...svg.matchAll(/<polyline fill="none" stroke="([^"]+)"/g)].map((m) => m[1]);
    const dots = [...svg.matchAll(/<circle cx="[^"]+" cy="[^"]+" r="5" fill="([^"]+)"/g)].map((m) => m[1]);
    expect(lines).toHaveLength(13);
    expect(new Set(lines).size).toBe(13);
    expect(dots).toHaveLength(26); // point and legend marker of each policy
    expect(new Set(dots).size).toBe(13);
  });

  it('reports the edge replica-seconds each pair held beside its scheduling cost', () => {
    const r = kais('eval', '--scenario', 'tiny', '--frames', '4', '--json', '--policies', 'jsq/static,lec/hpa,lec/gsp-ss');
    expect(r.code).toBe(0);
    const by = Object.fromEntries(
      (JSON.parse(r.stdout).results as { policy: string; replicaSeconds: number; schedulingCost: number }[]).map((x) => [x.policy, x]),
    );
    // static holds the initial placement (tiny: 4 replicas) for the whole run, 4 frames of 25 s
    expect(by['jsq/static'].replicaSeconds).toBe(4 * 4 * 25);
    expect(Object.keys(by['jsq/static'])).toEqual(expect.arrayContaining(['schedulingCost', 'replicaSeconds']));
    for (const p of ['lec/hpa', 'lec/gsp-ss']) {
      expect(by[p].schedulingCost).toBeGreaterThan(0);
      expect(by[p].replicaSeconds).toBeGreaterThan(0);
    }
  });

  it('--seeds: each seed as kais eval --seed prints it, and per pair the mean, its s.e. and the paired ratio of the first pair', () => {
    const common = ['eval', '--scenario', 'tiny', '--frames', '2', '--policies', 'lec/hpa,jsq/static,random/static', '--json'];
    const r = kais(...common, '--seeds', '3-5');
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout) as {
      seeds: number[];
      frames: number;
      runs: {
        seed: number;
        results: { policy: string; throughputRate: number; replicaSeconds: number }[];
        oracle: { throughputRate: number };
      }[];
      summary: {
        policy: string;
        throughputRate: { mean: number; se: number };
        firstOverPair: { mean: number; se: number } | null;
        replicaSeconds: { mean: number };
      }[];
      bestOther: { policy: string; firstOverPair: { mean: number; se: number }; replicaRatio: { mean: number; se: number } };
      oracle: { mean: number };
    };
    expect(rep.seeds).toEqual([3, 4, 5]);
    // --jobs 2: the seeds in worker threads side by side, the same report to the byte
    const side = kais(...common, '--seeds', '3-5', '--jobs', '2');
    expect(side.code).toBe(0);
    expect(side.stdout).toBe(r.stdout);
    expect(rep.frames).toBe(2);
    // every run is what kais eval --seed s --json prints
    for (const [k, seed] of [3, 4, 5].entries()) {
      const one = kais(...common, '--seed', String(seed));
      expect(one.code).toBe(0);
      expect(rep.runs[k]).toEqual(JSON.parse(one.stdout));
    }
    // the statistics, recomputed here from the runs
    const m = (v: number[]) => v.reduce((a, b) => a + b, 0) / v.length;
    const s = (v: number[]) => Math.sqrt(v.reduce((a, b) => a + (b - m(v)) ** 2, 0) / (v.length - 1) / v.length);
    const rates = (k: number) => rep.runs.map((x) => x.results[k].throughputRate);
    expect(rep.summary.map((x) => x.policy)).toEqual(['lec/hpa', 'jsq/static', 'random/static']);
    for (const k of [0, 1, 2]) {
      expect(rep.summary[k].throughputRate.mean).toBeCloseTo(m(rates(k)), 4);
      expect(rep.summary[k].throughputRate.se).toBeCloseTo(s(rates(k)), 4);
      expect(rep.summary[k].replicaSeconds.mean).toBeCloseTo(m(rep.runs.map((x) => x.results[k].replicaSeconds)), 1);
    }
    expect(rates(0)).not.toEqual(rates(1)); // the seeds differ, so the figures do
    expect(rep.summary[0].firstOverPair).toBeNull();
    for (const k of [1, 2]) {
      const ratio = rates(0).map((x, i) => x / rates(k)[i]);
      expect(rep.summary[k].firstOverPair!.mean).toBeCloseTo(m(ratio), 4);
      expect(rep.summary[k].firstOverPair!.se).toBeCloseTo(s(ratio), 4);
    }
    const best = rep.summary[1].throughputRate.mean >= rep.summary[2].throughputRate.mean ? rep.summary[1] : rep.summary[2];
    const bestK = rep.summary.indexOf(best);
    const replicas = (k: number) => rep.runs.map((x) => x.results[k].replicaSeconds);
    const replicaRatio = replicas(0).map((x, i) => x / replicas(bestK)[i]);
    expect(rep.bestOther).toEqual({ policy: best.policy, firstOverPair: best.firstOverPair, replicaRatio: expect.any(Object) });
    expect(rep.bestOther.replicaRatio.mean).toBeCloseTo(m(replicaRatio), 3);
    expect(rep.bestOther.replicaRatio.se).toBeCloseTo(s(replicaRatio), 3);
    expect(replicaRatio.some((x) => Math.abs(x - 1) > 0.01)).toBe(true); // the pairs hold different replicas, so the ratio says something
    expect(rep.oracle.mean).toBeCloseTo(m(rep.runs.map((x) => x.oracle.throughputRate)), 4);
    // a table without --json, with the seeds and the ratio to the best other pair
    const plot = path.join(tmp, 'seeds.svg');
    const t = kais('eval', '--scenario', 'tiny', '--frames', '2', '--policies', 'lec/hpa,jsq/static', '--seeds', '3,5', '--plot', plot);
    expect(t.code).toBe(0);
    expect(t.stdout).toMatch(/^scenario tiny, workload p4, seeds 3,5 \(2\), 2 frames/);
    expect(t.stdout).toMatch(/policy\s+throughput \(s\.e\.\)\s+lec\/hpa \/ pair \(s\.e\.\)/);
    expect(t.stdout).toMatch(
      /^lec\/hpa \/ the best other pair \(jsq\/static\): \d\.\d{3} \(\d\.\d{3}\), paired seed by seed, at \d\.\d{2}x its replica-seconds \(s\.e\. \d\.\d{2}\)$/m,
    );
    expect(t.stderr).toMatch(/seed 5 done \(2\/2/);
    // --plot: the per-frame means and the means against replica-seconds, one line and one point per pair
    expect(t.stdout.trimEnd().split('\n').pop()).toBe(`wrote ${plot}`);
    const svg = fs.readFileSync(plot, 'utf8');
    expect(svg).toMatch(/mean over 2 seeds/);
    expect([...svg.matchAll(/<polyline fill="none"/g)]).toHaveLength(2);
    expect(svg).toMatch(/jsq\/static \(0\.0 ops\)/);
  });

  it('--seeds: a bad list, one seed, --seed beside it, --jobs without it or a bad policy in a worker exit 2 with one line', () => {
    const tiny = ['eval', '--scenario', 'tiny', '--frames', '1'];
    expectUsageError(kais(...tiny, '--seeds', '5-3'), /--seeds: the range 5-3 runs backwards/);
    expectUsageError(kais(...tiny, '--seeds', '1,x'), /--seeds: expected a-b or a comma-separated list of integers/);
    expectUsageError(kais(...tiny, '--seeds', '1,2,1'), /--seeds: seed 1 is listed twice/);
    expectUsageError(kais(...tiny, '--seeds', '7'), /--seeds: give at least 2 seeds \(for one seed: --seed\)/);
    expectUsageError(kais(...tiny, '--seeds', '1-2000'), /--seeds: 2000 seeds, more than 1000/);
    expectUsageError(kais(...tiny, '--seeds', '1-3', '--seed', '1'), /--seeds: give --seed or --seeds, not both/);
    expectUsageError(kais(...tiny, '--jobs', '2'), /--jobs: runs seeds side by side; give --seeds too/);
    expectUsageError(kais(...tiny, '--seeds', '1-2', '--jobs', '0'), /--jobs: expected an integer >= 1/);
    // a mistake found inside a worker thread: exit 2, its one line
    expectUsageError(
      kais(...tiny, '--seeds', '1-3', '--jobs', '2', '--policies', 'lec/nope'),
      /--policies: unknown orchestration policy "nope"/,
    );
  });

  it('refuses an unknown policy with exit code 2 and one line', () => {
    expectUsageError(
      kais('eval', '--scenario', 'tiny', '--policies', 'jsq/static,fastest/hpa'),
      /--policies: unknown dispatch policy "fastest"/,
    );
    expectUsageError(kais('eval', '--scenario', 'tiny', '--policies', 'jsq'), /--policies: "jsq" is not dispatch\/orchestration/);
    expectUsageError(
      kais('eval', '--scenario', 'tiny', '--policies', 'jsq/static,lec/hpa,jsq/static'),
      /^kais: --policies: jsq\/static is listed twice$/,
    );
  });

  it('says which model flags no pair uses, and runs as without them', () => {
    const plain = kais('eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'lec/hpa', '--json');
    const r = kais(
      'eval',
      '--scenario',
      'tiny',
      '--frames',
      '1',
      '--policies',
      'lec/hpa',
      '--json',
      '--checkpoint',
      'package.json',
      '--gpg',
      'package.json',
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^kais: ignored: --checkpoint \(no cmmac pair\), --gpg \(no gpg pair\)$/m);
    expect(r.stdout).toBe(plain.stdout);
    const g = kais('eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'lec/hpa', '--json', '--guard-enter', '0.5');
    expect(g.stderr).toMatch(/^kais: ignored: --guard-enter \(no cmmac\+guard pair\)$/m);
    expect(g.stdout).toBe(plain.stdout);
  });

  it('cmmac runs the shipped argmax actor under hpa and gpg; the actor fine-tuned on GPG samples, as its file says', async () => {
    type Report = {
      cmmacAct?: string;
      gpg?: string;
      guard?: string;
      results: { policy: string; cmmacAct?: string; throughputRate: number; completedInTime: number }[];
    };
    // one frame of kais, JSON
    const run = async (policies: string, ...extra: string[]): Promise<Report> => {
      const r = await kaisAsync('eval', '--scenario', 'kais', '--frames', '1', '--policies', policies, '--json', ...extra);
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as Report;
    };
    const model = (name: string) => ['--checkpoint', path.join(ROOT, 'models', name)];
    // the five runs are independent: started together (kaisAsync runs as many at once as there are cores)
    const [j, s, o, named, gpgUnderHpa] = await Promise.all([
      run('cmmac/hpa,cmmac/gpg,cmmac+guard/gpg,lec/hpa'),
      run('cmmac/gpg,lec/hpa', ...model('kais-cmmac-gpg.bin')),
      // --cmmac-act overrides the model's act
      run('cmmac/hpa,cmmac/gpg', '--cmmac-act', 'argmax', ...model('kais-cmmac-gpg.bin')),
      run('cmmac/hpa', ...model('kais-cmmac.bin')),
      run('cmmac/hpa', ...model('kais-cmmac-gpg.bin')),
    ]);
    expect(j.results.map((x) => x.cmmacAct)).toEqual([undefined, undefined, undefined, undefined]);
    expect(s.results.map((x) => x.cmmacAct)).toEqual(['sample', undefined]);
    expect(s.cmmacAct).toBe('sample'); // every cmmac pair sampled
    expect(o.results.map((x) => x.cmmacAct)).toEqual([undefined, undefined]);
    // --checkpoint takes an exported actor (.bin + .json) as well as a kais train file: the shipped one by name
    // runs what the default runs; the gpg actor under hpa samples too
    const n = named.results[0];
    const d = j.results[0];
    expect([n.throughputRate, n.completedInTime, n.cmmacAct]).toEqual([d.throughputRate, d.completedInTime, undefined]);
    expect(gpgUnderHpa.results[0].cmmacAct).toBe('sample');
    // the report says what the GPG model ran (the shipped file and its gated scale-in), only where a gpg pair ran
    expect(j.gpg).toMatch(
      /^gpg \S*kais-gpg\.json: 6 nodes a decision, then hpa's scale-in \(.*no removal above a failed share of 0\.3, .*target 0\.85, none kept per eAP, no removal above a failed share of 0\.6\); actor switch: kais-cmmac-drawn\.bin dispatches in the first frame and after every light window, the main actor after any other$/,
    );
    expect(named.gpg).toBeUndefined();
    // and what the guard of the cmmac+guard pair ran (the shipped guard), only where such a pair ran
    expect(j.guard).toBe(
      'lec from a late share of 0.2 (back at 0.15), round-robin from a late share of 0.45 (back at 0.35); half-life 200 decisions, dwell 200',
    );
    expect(named.guard).toBeUndefined();
  }, 180_000);

  it('--guard-* set the guard of cmmac+guard pairs as kais agent --guard does: a different guard, other numbers; a bad one exits 2', async () => {
    type Report = { guard?: string; results: { policy: string; throughputRate: number; completedInTime: number }[] };
    const run = async (...extra: string[]): Promise<Report> => {
      const r = await kaisAsync(
        'eval',
        '--scenario',
        'kais',
        '--frames',
        '2',
        '--load',
        '2',
        '--policies',
        'cmmac+guard/hpa,lec/hpa',
        '--json',
        ...extra,
      );
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as Report;
    };
    const [shipped, twoLevels] = await Promise.all([run(), run('--guard-enter', '0.3', '--guard-exit', '0.2', '--guard-mid', 'none')]);
    expect(twoLevels.guard).toBe('round-robin from a late share of 0.3 (back at 0.2); half-life 200 decisions, dwell 200');
    expect(twoLevels.results[0].throughputRate).not.toBe(shipped.results[0].throughputRate);
    // the heuristic pair does not see the flags
    expect(twoLevels.results[1]).toEqual(shipped.results[1]);
    // checked before anything runs, whatever the pairs
    const tiny = ['eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'lec/hpa'];
    expectUsageError(
      kais(...tiny, '--guard-enter', '0.3', '--guard-exit', '0.5'),
      /^kais: --guard-exit: must be below --guard-enter \(0\.3\), got 0\.5$/,
    );
    expectUsageError(
      kais(...tiny, '--guard-mid-enter', '0.5'),
      /^kais: --guard-mid-enter: must be in \(0, --guard-enter=0\.45\), got 0\.5$/,
    );
    expectUsageError(kais(...tiny, '--guard-fallback', 'greedy'), /--guard-fallback/);
  }, 180_000);

  it('--cmmac-act sample: cmmac draws from its policy, the same draws for the same seed; heuristics unchanged; a bad value exits 2', async () => {
    // the sampled run twice (separate processes, side by side): the same draws for the same seed
    const [argmax, sample, again] = await Promise.all([
      cmmacStatic(),
      cmmacStatic('--cmmac-act', 'sample'),
      cmmacStatic('--cmmac-act', 'sample'),
    ]);
    expect(argmax.cmmacAct).toBeUndefined(); // the default leaves the report as it was
    expect(sample.cmmacAct).toBe('sample');
    expect(again).toEqual(sample);
    expect(sample.results[0].completedInTime).not.toBe(argmax.results[0].completedInTime);
    expect(sample.results[1]).toEqual(argmax.results[1]); // lec/static does not read the switch
    expectUsageError(kais('eval', '--scenario', 'tiny', '--cmmac-act', 'softmax'), /--cmmac-act/);
  }, 180_000);

  it('--slot: finer learning slots, same frames and requests, about the same results (dispatch is on arrival); the learned model still loads; a bad slot exits 2', async () => {
    const [coarse, fine] = await Promise.all([cmmacStatic(), cmmacStatic('--slot', '0.05')]);
    expect(coarse.slotS).toBe(0.25);
    expect(fine.slotS).toBe(0.05);
    for (let i = 0; i < 2; i++) {
      expect(fine.results[i].arrived).toBe(coarse.results[i].arrived);
      // requests go out on arrival whatever the slot; only the slot-boundary sweep of hopeless
      // queued requests (and so the queue lengths policies see) runs more often: measured 0.0115
      // apart for one of the two on this one frame
      expect(Math.abs(fine.results[i].throughputRate - coarse.results[i].throughputRate)).toBeLessThan(0.02);
    }
    expectUsageError(
      kais('eval', '--scenario', 'tiny', '--slot', '0.3'),
      /--slot: must divide the \S+ s frame of scenario tiny into whole slots, got 0.3/,
    );
    expectUsageError(kais('eval', '--scenario', 'tiny', '--slot', '0'), /--slot: expected a number > 0/);
  }, 180_000);

  it("--view agent runs the policies on the live agent's view and says so in the JSON; a bad --view exits 2", () => {
    const r = kais('eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'lec/hpa', '--view', 'agent', '--json');
    expect(r.code).toBe(0);
    const report = JSON.parse(r.stdout);
    expect(report.view).toBe('agent');
    expect(report.results[0].arrived).toBe(
      report.results[0].completedInTime + report.results[0].late + report.results[0].dropped + report.results[0].queuedAtEnd,
    );
    expectUsageError(kais('eval', '--scenario', 'tiny', '--view', 'local'), /--view: expected one of agent, global, got "local"/);
  });

  it('refuses a negative load, a bad frame count and an unknown scenario', () => {
    expectUsageError(kais('eval', '--scenario', 'tiny', '--load', '-1'), /--load: expected a number > 0 and <= 100, got "-1"/);
    expectUsageError(kais('eval', '--scenario', 'tiny', '--frames', '0'), /--frames: expected an integer >= 1/);
    expectUsageError(kais('eval', '--scenario', 'huge'), /--scenario: unknown scenario "huge"/);
  });

  it('refuses a scenario file with a bad field, naming the file and the field', () => {
    const s = JSON.parse(fs.readFileSync(path.join(ROOT, 'shared', 'scenarios', 'tiny.json'), 'utf8'));
    s.eaps[0].nodes[1].cpuCores = -2;
    const f = path.join(tmp, 'bad.json');
    fs.writeFileSync(f, JSON.stringify(s));
    expectUsageError(kais('eval', '--scenario', f), /bad\.json: field "eaps\[0\]\.nodes\[1\]\.cpuCores" must be in/);
    fs.writeFileSync(f, '{"slotS": ');
    expectUsageError(kais('eval', '--scenario', f), /bad\.json: not valid JSON/);
  });

  it('runs a scenario file that is valid', () => {
    const f = path.join(tmp, 'ok.json');
    fs.copyFileSync(path.join(ROOT, 'shared', 'scenarios', 'small.json'), f);
    const r = kais('eval', '--scenario', f, '--frames', '1', '--policies', 'jsq/hpa', '--json');
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout).results[0].arrived).toBeGreaterThan(0);
  });

  it('refuses a missing trace file and a trace with too many malformed rows', () => {
    expectUsageError(kais('eval', '--scenario', 'tiny', '--trace', path.join(tmp, 'nope.csv')), /nope\.csv/);
    const bad = path.join(tmp, 'bad.csv');
    fs.writeFileSync(bad, '10,20,1,1,1,Terminated,50,0.01\nthis,is,not,a,row\n30,40,1,2,1,Terminated,50,0.01\n');
    expectUsageError(kais('eval', '--scenario', 'tiny', '--trace', bad), /bad\.csv/);
  });

  it('skips a few malformed trace rows and reports them in one line on stderr', () => {
    const lines: string[] = [];
    for (let i = 0; i < 300; i++) lines.push(`${i * 2},${i * 2 + 30},${i % 7},${i},1,Terminated,50,0.01`);
    lines.splice(100, 0, '12,oops,1');
    const f = path.join(tmp, 'few-bad.csv');
    fs.writeFileSync(f, lines.join('\n') + '\n');
    const r = kais('eval', '--scenario', 'tiny', '--trace', f, '--frames', '1', '--policies', 'jsq/static', '--json');
    expect(r.code).toBe(0);
    expect(r.stderr.split('\n').filter((l) => /malformed/.test(l))).toHaveLength(1);
    // one "kais: " prefix, not two (the workload's line carries it, and so did the progress printer)
    expect(r.stderr.split('\n')).toContain(`kais: ${f}: skipped 1 malformed rows of 301 (first at line 101: 3 columns, expected 8)`);
    expect(r.stderr).not.toMatch(/kais: kais:/);
    expect(JSON.parse(r.stdout).trace).toBe(f);
    // the same line from each seed's run, also when the seeds run in worker threads
    for (const jobs of ['1', '2']) {
      const m = kais(
        'eval',
        '--scenario',
        'tiny',
        '--trace',
        f,
        '--frames',
        '1',
        '--policies',
        'jsq/static',
        '--json',
        '--seeds',
        '1-2',
        '--jobs',
        jobs,
      );
      expect(m.code).toBe(0);
      expect(m.stderr.split('\n').filter((l) => /malformed/.test(l))).toHaveLength(2);
      expect(m.stderr).not.toMatch(/kais: kais:/);
    }
  });

  it('refuses cmmac without a usable checkpoint, in one line', () => {
    expectUsageError(
      kais('eval', '--scenario', 'tiny', '--policies', 'cmmac/hpa', '--checkpoint', path.join(tmp, 'none.db')),
      /--checkpoint: .*none\.db does not exist/,
    );
    const bad = path.join(tmp, 'corrupt.db');
    fs.writeFileSync(bad, 'this is not a database');
    expectUsageError(kais('eval', '--scenario', 'tiny', '--policies', 'cmmac/hpa', '--checkpoint', bad), /corrupt\.db/);
    // an exported actor made for another scenario
    expectUsageError(
      kais('eval', '--scenario', 'tiny', '--policies', 'cmmac/hpa', '--checkpoint', path.join(ROOT, 'models', 'kais-cmmac.bin')),
      /kais-cmmac\.bin: trained on scenario "kais", not "tiny"/,
    );
  });

  it('loads the tfjs backend only where a gpg pair runs: not for the default pairs of a scenario without a shipped GPG', () => {
    // a preload that reports, at exit, whether the backend was loaded (shared/tf-backend.ts; tfjs itself is
    // imported by every command's module, the wasm backend's start is what costs)
    const probe = path.join(tmp, 'tf-probe.js');
    fs.writeFileSync(
      probe,
      "process.on('exit', () => process.stderr.write('backend loaded: ' + Object.keys(require.cache).some((k) => k.includes('tfjs-backend-wasm')) + '\\n'));\n",
    );
    const run = (...args: string[]) =>
      spawnSync(process.execPath, ['-r', probe, KAIS, 'eval', '--frames', '1', ...args], { encoding: 'utf8', timeout: 120000 });
    const tiny = run('--scenario', 'tiny');
    expect(tiny.status).toBe(0);
    expect(tiny.stderr).toContain('backend loaded: false');
    const gpg = run('--scenario', 'small', '--policies', 'lec/gpg', '--gpg', path.join(ROOT, 'models', 'small-gpg-lec.json'));
    expect(gpg.status).toBe(0);
    expect(gpg.stderr).toContain('backend loaded: true');
    // the table's last line says what the GPG model ran; no such line without a gpg pair
    expect(gpg.stdout.trimEnd().split('\n').pop()).toMatch(
      /^orchestration: gpg \S*small-gpg-lec\.json: \d+ nodes a decision, no scale-in$/,
    );
    expect(tiny.stdout).not.toMatch(/^orchestration:/m);
  });

  it('adds decision latency to the table with --timing', () => {
    const r = kais('eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'jsq/static', '--timing');
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/decision p99 us/);
  });

  it('--calibration: per pair and side, what the view predicted of each decision against what happened; nothing else changes', () => {
    const args = ['eval', '--scenario', 'tiny', '--frames', '2', '--seed', '3', '--policies', 'lec/hpa,round-robin/static', '--json'];
    const plain = kais(...args);
    const cal = kais(...args, '--calibration');
    expect(plain.code).toBe(0);
    expect(cal.code).toBe(0);
    const a = JSON.parse(plain.stdout) as { results: Record<string, unknown>[] };
    const b = JSON.parse(cal.stdout) as typeof a;
    type Row = { sent: number; unfinished: number; inTime: number; predictedInTime: number; inTimeWhenPredicted: number };
    for (let i = 0; i < a.results.length; i++) {
      const { viewCalibration, ...rest } = b.results[i] as { viewCalibration: { edge: Row; cloud: Row } };
      // scoring the decisions leaves every figure of the run as it was
      expect(rest).toEqual(a.results[i]);
      const r = a.results[i] as { arrived: number; completedInTime: number; queuedAtEnd: number; cloudShare: number };
      const { edge, cloud } = viewCalibration;
      // every in-time request was dispatched by the policy, on one side or the other
      expect(edge.inTime + cloud.inTime).toBe(r.completedInTime);
      // a decision per arrival that reached an eAP within the run; the unfinished ones are still in the system
      expect(edge.sent + cloud.sent).toBeLessThanOrEqual(r.arrived);
      expect(edge.sent + cloud.sent).toBeGreaterThan(r.arrived * 0.95);
      expect(cloud.sent / (edge.sent + cloud.sent)).toBeCloseTo(r.cloudShare, 2);
      expect(edge.unfinished + cloud.unfinished).toBeLessThanOrEqual(edge.sent + cloud.sent - r.completedInTime);
      for (const row of [edge, cloud]) {
        expect(row.predictedInTime).toBeLessThanOrEqual(row.sent);
        expect(row.inTimeWhenPredicted).toBeLessThanOrEqual(Math.min(row.predictedInTime, row.inTime));
        expect(row.sent).toBeGreaterThan(0);
      }
    }
    // lec sends a request to the target with the smallest eta among those that meet its slack: the
    // view it decides on says "in time" more often than round-robin's choices do
    const share = (x: unknown) => {
      const c = (x as { viewCalibration: { edge: Row; cloud: Row } }).viewCalibration;
      return (c.edge.predictedInTime + c.cloud.predictedInTime) / (c.edge.sent + c.cloud.sent);
    };
    expect(share(b.results[0])).toBeGreaterThan(share(b.results[1]));
    const table = kais(...args.slice(0, -1), '--calibration');
    expect(table.code).toBe(0);
    expect(table.stdout).toMatch(/view calibration +side +sent +in time +view: in time +in time when the view said so/);
    expect(table.stdout.split('\n').filter((l) => /^(lec\/hpa|round-robin\/static) +(edge|cloud) /.test(l))).toHaveLength(4);

    // --seeds: each seed's report keeps its calibration, and the table adds the counts over the seeds
    const many = [
      'eval',
      '--scenario',
      'tiny',
      '--frames',
      '2',
      '--seeds',
      '3-4',
      '--policies',
      'lec/hpa,round-robin/static',
      '--calibration',
    ];
    const j = kais(...many, '--json');
    expect(j.code).toBe(0);
    const runs = (JSON.parse(j.stdout) as { runs: { results: { policy: string; viewCalibration: { edge: Row; cloud: Row } }[] }[] }).runs;
    // seed 3's run is the single run above, to the byte
    expect(JSON.stringify(runs[0].results)).toBe(JSON.stringify(b.results));
    const pooledText = kais(...many);
    expect(pooledText.code).toBe(0);
    expect(pooledText.stdout).toMatch(/view calibration \(seeds pooled\) +side +sent/);
    for (const pair of ['lec/hpa', 'round-robin/static']) {
      for (const side of ['edge', 'cloud'] as const) {
        const sent = runs.reduce((n, run) => n + run.results.find((x) => x.policy === pair)!.viewCalibration[side].sent, 0);
        const line = pooledText.stdout.split('\n').find((l) => l.startsWith(pair) && new RegExp(` ${side} `).test(l));
        expect(line).toBeDefined();
        expect(line!.trim().split(/ +/)[2]).toBe(String(sent));
      }
    }
  });

  it('writes a PNG plot', () => {
    const plot = path.join(tmp, 'p.png');
    const r = kais('eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'jsq/static', '--plot', plot);
    expect(r.code).toBe(0);
    expect(fs.readFileSync(plot).subarray(1, 4).toString()).toBe('PNG');
  });

  it('prints the report before the plot; a plot the disk refuses is one line and exit 1, leaving no part of it', () => {
    // the disk is full for files whose name holds "full-disk." (half the bytes land, then ENOSPC)
    const probe = fullDiskWritePreload(tmp);
    const dir = tmpDir('kais-eval-plot-');
    for (const [name, extra] of [
      ['full-disk.svg', ['--json']],
      ['full-disk.png', []],
      ['full-disk.svg', ['--json', '--seeds', '1,2']],
    ] as const) {
      const plot = path.join(dir, name);
      const r = spawnSync(
        process.execPath,
        ['-r', probe, KAIS, 'eval', '--scenario', 'tiny', '--frames', '1', '--policies', 'jsq/static', '--plot', plot, ...extra],
        { encoding: 'utf8', timeout: 120000 },
      );
      expect(r.status).toBe(1);
      // the results are out: the JSON on stdout (or the table), whatever became of the plot
      if (extra.includes('--json')) expect(JSON.parse(r.stdout)).toHaveProperty(extra.includes('--seeds') ? 'seeds' : 'results');
      else expect(r.stdout).toMatch(/jsq\/static/);
      expect(r.stdout).not.toMatch(/wrote/);
      // with --seeds, after the "seed n done" progress lines
      expect(
        r.stderr
          .trim()
          .split('\n')
          .filter((l) => !/^kais: seed \d+ done/.test(l)),
      ).toEqual([`kais: --plot: cannot write ${plot}: ENOSPC`]);
      expect(fs.readdirSync(dir)).toEqual([]);
    }
  });

  it('injects node failures at the real event times of the server event file', () => {
    const d = fs.existsSync(DATA);
    if (!d) return console.warn(`skipped: ${DATA} is absent`);
    const r = kais(
      'eval',
      '--scenario',
      'small',
      '--frames',
      '4',
      '--policies',
      'lec/hpa',
      '--fault-events',
      path.join(DATA, 'v2017_server_event.csv'),
      '--json',
    );
    expect(r.code).toBe(0);
    const rep = JSON.parse(r.stdout);
    expect(rep.faults).toBeGreaterThan(0);
    expect(rep.results[0].lostToFailedNodes).toBeGreaterThan(0);
  });
});

const withData = fs.existsSync(DATA) ? describe : describe.skip;
if (!fs.existsSync(DATA)) console.warn(`trace tests skipped: ${DATA} is absent`);

withData('kais eval on the Alibaba trace', () => {
  it('replays the dev rows and a later window of the v2017 trace', () => {
    const all = fs.readFileSync(path.join(DATA, 'v2017_batch_task.csv'), 'utf8').split('\n').filter(Boolean);
    const late = all.filter((l) => Number(l.split(',')[0]) > 30000);
    const f = path.join(tmp, 'later-window.csv');
    fs.writeFileSync(f, late.join('\n') + '\n');
    for (const trace of [path.join(DATA, 'v2017_batch_task.csv'), f]) {
      const r = kais('eval', '--scenario', 'kais', '--trace', trace, '--frames', '4', '--policies', 'random/static,jsq/hpa', '--json');
      expect(r.code).toBe(0);
      const rep = JSON.parse(r.stdout);
      expect(rep.trace).toBe(trace);
      for (const x of rep.results) {
        expect(x.arrived).toBeGreaterThan(1000);
        expect(x.arrived).toBe(x.completedInTime + x.late + x.dropped + x.queuedAtEnd);
      }
    }
  });
});
