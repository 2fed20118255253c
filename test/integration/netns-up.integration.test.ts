/**
 * `kais up` across network namespaces against its prediction and its loopback run (issue 19
 * "Must show": live / predicted within 0.95-1.05 of the loopback run, 100 ms / 1% WAN links).
 * The harness is test/support/netns-up.ts (kais up's roles in namespaces, its requests, prediction
 * and accounting). Opt-in, because the comparison is a timing measurement that needs a quiet
 * machine and the smoke run still takes the CPU for a while:
 *
 *   KAIS_NETNS_UP=smoke    one short run in namespaces (10 s of load): the harness works (every
 *                          request accounted for, none unanswered, every agent on a placement and
 *                          with cmmac on weights, a prediction to compare with); no ratio is asserted
 *   KAIS_NETNS_UP=compare  the measurement: `kais up --json` on loopback, the harness on loopback
 *                          (its own fidelity to kais up), then in namespaces, same requests
 *                          (KAIS_NETNS_UP_S seconds of load each, default 60); asserts
 *                          live / predicted in 0.95-1.05 in namespaces and on loopback, and the
 *                          namespace run's throughput rate within 0.95-1.05 of the loopback run's
 *   KAIS_NETNS_UP_POLICY=cmmac  with either: cmmac (the model shipped for `kais`, learning online,
 *                          as kais up runs it) on `kais` (5 eAPs) at speed 1, instead of lec on `small`
 *
 * Needs root and dist/ (npm run build); skips with the reason otherwise. Its lab uses the address
 * block 20 (10.213.160.0/21) so that it can run beside netns-autonomy (block 0 and up).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { NetnsLab } from '../support/netns';
import { runNetnsUp, type NetnsUpOptions, type NetnsUpSummary } from '../support/netns-up';

const bin = path.join(__dirname, '..', '..', 'dist', 'kais.js');
const mode = process.env.KAIS_NETNS_UP;
const why =
  mode !== 'smoke' && mode !== 'compare'
    ? 'opt-in: KAIS_NETNS_UP=smoke (the harness, 10 s) or KAIS_NETNS_UP=compare (the measurement, on a quiet machine)'
    : (NetnsLab.unavailable() ?? (fs.existsSync(bin) ? null : 'dist/kais.js is missing: run npm run build'));
if (why) console.warn(`netns kais up test skipped: ${why}`);
const maybe = why ? describe.skip : describe;

const LAB_BLOCK = 20;
// KAIS_NETNS_UP_POLICY=cmmac: the shipped model on its scenario (kais: 5 eAPs, learning online as
// kais up does), at speed 1 (about the small run's request rate); default lec on small
const cmmac = process.env.KAIS_NETNS_UP_POLICY === 'cmmac';
const run = {
  scenario: cmmac ? 'kais' : 'small',
  policy: cmmac ? 'cmmac' : 'lec',
  orchestration: 'static',
  workload: 'p4',
  seed: 1,
  load: 1,
  speed: cmmac ? 1 : 5,
  wan: { delayMs: 50, lossPct: 1 },
} as const;

maybe('kais up in network namespaces', () => {
  let lab: NetnsLab | null = null;
  let dir: string | null = null;

  afterEach(async () => {
    await lab?.destroy();
    lab = null;
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    dir = null;
  });

  async function harness(durationS: number, loopback: boolean): Promise<NetnsUpSummary> {
    lab = new NetnsLab(LAB_BLOCK);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-netns-up-'));
    fs.chmodSync(dir, 0o700);
    const o: NetnsUpOptions = { lab, dir, bin, ...run, durationS, loopback, log: (l) => console.log(l) };
    try {
      return await runNetnsUp(o);
    } catch (e) {
      throw new Error(`${(e as Error).message}\n${lab.tails()}`, { cause: e });
    } finally {
      await lab.destroy();
      lab = null;
    }
  }

  const accounted = (s: NetnsUpSummary) => {
    expect(s.sent).toBeGreaterThan(0);
    expect(s.completedInTime + s.late + s.refused + s.unanswered).toBe(s.sent);
    expect(s.unanswered).toBe(0);
    for (const e of s.perEap) expect(e.placementVersion).not.toBeNull();
    if (cmmac) for (const e of s.perEap) expect(e.weightVersion).not.toBeNull();
  };

  (mode === 'smoke' ? test : test.skip)(
    'the harness: kais up’s roles in namespaces, every request accounted for, a prediction to compare with',
    async () => {
      const s = await harness(10, false);
      console.log(JSON.stringify(s));
      accounted(s);
      expect(s.evalThroughputRate).toBeGreaterThan(0);
      expect(Number.isFinite(s.vsEval)).toBe(true);
    },
    180_000,
  );

  (mode === 'compare' ? test : test.skip)(
    'live / predicted in namespaces within 0.95-1.05, and within 0.95-1.05 of the loopback run',
    async () => {
      const durationS = Number(process.env.KAIS_NETNS_UP_S ?? 60);
      const up = spawnSync(
        process.execPath,
        [
          bin,
          'up',
          '--json',
          '--scenario',
          run.scenario,
          '--policy',
          run.policy,
          '--orchestration',
          run.orchestration,
          '--workload',
          run.workload,
          '--seed',
          String(run.seed),
          '--load',
          String(run.load),
          '--speed',
          String(run.speed),
          '--duration',
          String(durationS),
        ],
        { encoding: 'utf8', timeout: (durationS + 120) * 1000, maxBuffer: 64 * 1048576 },
      );
      expect(up.status).toBe(0);
      const kaisUp = JSON.parse(up.stdout.trim().split('\n').pop()!) as { throughputRate: number; vsEval: number; unanswered: number };
      const loop = await harness(durationS, true);
      const ns = await harness(durationS, false);
      console.log(JSON.stringify({ kaisUp: { rate: kaisUp.throughputRate, vsEval: kaisUp.vsEval }, loop, ns }));
      expect(kaisUp.unanswered).toBe(0);
      accounted(loop);
      accounted(ns);
      // the harness on loopback is kais up (same requests, same generator)
      expect(loop.throughputRate / kaisUp.throughputRate).toBeGreaterThanOrEqual(0.97);
      expect(loop.throughputRate / kaisUp.throughputRate).toBeLessThanOrEqual(1.03);
      for (const v of [kaisUp.vsEval, ns.vsEval]) {
        expect(v).toBeGreaterThanOrEqual(0.95);
        expect(v).toBeLessThanOrEqual(1.05);
      }
      expect(ns.throughputRate / kaisUp.throughputRate).toBeGreaterThanOrEqual(0.95);
      expect(ns.throughputRate / kaisUp.throughputRate).toBeLessThanOrEqual(1.05);
    },
    900_000,
  );
});
