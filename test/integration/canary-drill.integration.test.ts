/**
 * The bad-weights drill with the gate off (issue 17 item 5, "Must show"), through the real CLI
 * (dist/kais.js, built by `npm test`): `kais up --no-learn --canary --inject bad-weights` on `kais` runs the
 * emulated cluster, the orchestrator, five agents and the load generator as real processes on
 * loopback; a third of the way in, random weights are handed to the publish path as if learned.
 * Under the shipped model's actor switch the version first waits for a baseline under the main
 * actor; then the canary must roll it back within its windows (how many it takes depends on
 * the load it meets: 1-4 on a quiet machine, docs/safe-learning.md), every agent
 * must end on a version after the rollback, no request may go unanswered, and the events must be
 * listed in the summary.
 * The test reads the events the run reports, never a timing of its own.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_CANARY } from '../../orchestrator/canary';

const ROOT = path.resolve(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

interface Ev {
  tsMs: number;
  kind: string;
  message: string;
}

const run = fs.existsSync(KAIS) ? it : it.skip;
/**
 * The canary's baseline and windows in this drill (`--canary-baseline`, `--canary-windows`): 30 s
 * and 4 windows instead of the default's 120 s and 8, so the run takes 150 s instead of 310 s (the
 * default's verdicts are measured in docs/safe-learning.md; a random version is rolled back after
 * 1-2 windows on a quiet machine, so the 4 windows of the default before session 54 leave room).
 */
const BASELINE_S = 30;
const WINDOWS = 4;
/** How long the drill's version waits for a baseline under the main actor: settleS + baselineS (32 s). */
const WAIT_S = DEFAULT_CANARY.settleS + BASELINE_S;
/** The run: the drill at a third of it, then the wait, then up to settleS + WINDOWS windows of 10 s (canaryLongestS), with room. */
const RUN_S = 150;

describe('kais up --no-learn --canary --inject bad-weights', () => {
  run(
    'rolls the random version back after a baseline under the main actor, 0 unanswered, the events listed',
    async () => {
      // --no-learn: the drill's version is the only one proposed (with learning on, it may wait behind
      // a learned version's canary and never be published in a short run; docs/safe-learning.md).
      // 60 s: the drill starts at a third of the run, at 20 s, when the agents' warm-up backlog is
      // behind it. At 40 s (13 s) the canary's baseline covered the warm-up, in which eAPs 0-1 ran
      // 0.013-0.078 below the others, and 3 of 7 drills by hand took 2-3 windows; at 60 s, 5 of 5 took
      // 1 window, baseline differences within 0.018 (docs/gpg.md, "The action budget H").
      // On the shipped GPG model, with the actor switch: at load 1 every window is light and the light
      // actor (which no version changes) would decide everywhere; while the canary runs, the placement
      // names the main actor, so the canary judges the version, and its baseline is measured under the
      // main actor too: the drill's version waits settleS + baselineS = 32 s for it before its canary
      // starts (docs/safe-learning.md, "The canary under the actor switch"). So 150 s: the drill at 50 s,
      // the canary from 82 s, its 4 windows of 10 s after 2 s of settling by 124 s, 26 s before the end
      // (at 120 s there were 6, and in a CI run of session 54 on a slow machine the run ended before
      // the verdict; with the default 120 s baseline and 8 windows the same drill needs 310 s: the
      // --inject help says so). On a quiet machine the
      // drill was rolled back after 1-2 windows (docs/safe-learning.md, "The baseline under the main
      // actor"); sharing the 2 CPUs with another test file it was still undecided after 2 windows in 2
      // of 2 runs at 90 s, so the test asks for the rollback, not for its window.
      const child = spawn(
        process.execPath,
        [
          KAIS,
          'up',
          '--duration',
          String(RUN_S),
          '--no-learn',
          '--canary',
          '--canary-baseline',
          String(BASELINE_S),
          '--canary-windows',
          String(WINDOWS),
          '--inject',
          'bad-weights',
          '--json',
        ],
        {
          stdio: ['ignore', 'pipe', 'pipe'],
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
      expect({ code, stderr: code === 0 ? '' : stderr.slice(-2000) }).toEqual({ code: 0, stderr: '' });
      const s = JSON.parse(stdout.trim().split('\n').pop()!) as {
        sent: number;
        unanswered: number;
        perEap: { weightVersion: number | null; sent: number; decisionsLight: number }[];
        safeLearningEvents: Ev[];
        canaryBaselineS: number | null;
        canaryWindows: number | null;
      };
      expect(s.unanswered).toBe(0);
      expect(s.sent).toBeGreaterThan(0);
      expect([s.canaryBaselineS, s.canaryWindows]).toEqual([BASELINE_S, WINDOWS]);
      const ev = s.safeLearningEvents;
      const inject = ev.find((e) => e.kind === 'inject')!;
      expect(inject.message).toMatch(
        /^bad-weights drill: random weights handed to the publish path as weights v(\d+) \(no gate: to the canary\)$/,
      );
      const bad = Number(/as weights v(\d+)/.exec(inject.message)![1]);
      const start = ev.find((e) => e.kind === 'canary-start' && e.message.includes(`weights v${bad} `))!;
      expect(start.message).toMatch(/^injected \(bad-weights drill\) weights v\d+ to eAPs 0, 1 first/);
      // --canary-baseline and --canary-windows reached the orchestrator's canary
      expect(start.message).toContain(`baseline the ${BASELINE_S} s before`);
      expect(start.message).toContain(`up to ${WINDOWS} windows of 10 s`);
      const rollback = ev.find((e) => e.kind === 'canary-rollback')!;
      expect(rollback.message).toMatch(
        new RegExp(`^weights v${bad} rolled back after [1-4] window\\(s\\); every eAP gets v\\d+'s weights as v(\\d+)`),
      );
      const restored = Number(/ as v(\d+)/.exec(rollback.message)![1]);
      // the lines were shown while it ran
      expect(stderr).toMatch(/kais up: event canary-rollback: weights v\d+ rolled back/);
      // no agent is left on the random version (a later learned canary may run on eAPs 0 and 1)
      for (const e of s.perEap) expect(e.weightVersion).toBeGreaterThanOrEqual(restored);
      // the version waited for a baseline under the main actor (at 50 s it always does: the first frame
      // is light, and a step names the main actor at 25 s at the earliest, so it has dispatched for at
      // most 25 s of the 32). When the light actor was
      // named, the placement was published again naming the main one at the proposal and the canary
      // started settleS + baselineS later; when a heavy window had named it already (a busy machine),
      // the canary started when the main actor had dispatched for that long
      const waits = ev.find((e) => e.kind === 'canary-baseline')!;
      expect(waits.message).toMatch(
        new RegExp(
          String.raw`^injected \(bad-weights drill\) version waits for a baseline under the main actor \(${WAIT_S} s of it\) before its canary: (the light actor dispatches now|the main actor has dispatched for \d+\.\d s)$`,
        ),
      );
      expect(waits.tsMs).toBeGreaterThanOrEqual(inject.tsMs);
      const hadS = /has dispatched for ([\d.]+) s$/.exec(waits.message);
      if (hadS === null) {
        const named = ev.find((e) => e.kind === 'canary-actor')!;
        expect(named.message).toMatch(/published again naming the main actor: the next canary's baseline is measured under it$/);
        expect(named.tsMs).toBeGreaterThanOrEqual(waits.tsMs);
        expect(start.tsMs - waits.tsMs).toBeGreaterThanOrEqual(WAIT_S * 1000);
      } else {
        expect(Number(hadS[1])).toBeLessThan(WAIT_S);
        // the message rounds to 0.1 s
        expect(start.tsMs - waits.tsMs).toBeGreaterThanOrEqual(WAIT_S * 1000 - Number(hadS[1]) * 1000 - 50);
      }
      expect(rollback.tsMs).toBeGreaterThan(start.tsMs);
      // the light actor decided outside the canary, the main actor during it, at every eAP (canary and control)
      for (const e of s.perEap) {
        expect(e.decisionsLight).toBeGreaterThan(0);
        expect(e.decisionsLight).toBeLessThan(e.sent);
      }
    },
    300_000,
  );
});
