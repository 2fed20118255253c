/**
 * kais up's closing summary as text (formatSummary): the note under a live rate far below the
 * prediction names a child that exited when one did (the CPU note said the machine was busy), and
 * each eAP's line counts the light actor's decisions (the actor switch).
 */
import { formatSummary, type UpSummary } from '../../../launcher/up';

// a real kais up --json summary (60 s on kais), trimmed to one target and one eAP
const run: UpSummary = {
  durationS: 60,
  scenario: 'kais',
  workload: 'p4',
  speed: 1,
  load: 1,
  policy: 'cmmac',
  sent: 31827,
  completedInTime: 23902,
  late: 1040,
  refused: 6885,
  unanswered: 0,
  throughputRate: 0.7509975806704999,
  weightVersionsApplied: 5,
  placementVersionsApplied: 3,
  orchestratorRestarts: 0,
  childExits: [],
  learning: true,
  learner: { transitionsRead: 2048, updates: 4, published: 4 },
  tls: false,
  evalPolicy: 'cmmac/gpg',
  orchestration: 'gpg models/kais-gpg.json',
  evalSlotS: 0.25,
  evalThroughputRate: 0.7672,
  vsEval: 0.9788811009782324,
  evalGlobalViewThroughputRate: 0.7841,
  cloudShare: 0.4912,
  evalCloudShare: 0.4847,
  refusedShare: 0.2163,
  evalDroppedShare: 0.1417,
  perTarget: [
    {
      target: 'node 0',
      live: {
        sent: 708,
        refused: 49,
        expired: 135,
        completed: 524,
        lost: 0,
      },
      predicted: {
        sent: 705,
        refused: 44,
        expired: 103,
        completed: 558,
        lost: 0,
      },
    },
  ],
  placementVsPredicted: [
    {
      frame: 0,
      replicasDiffering: 0,
    },
    {
      frame: 1,
      replicasDiffering: 34,
    },
  ],
  vsEvalGlobalView: 0.9577829111981889,
  loadAverage1m: 2.13,
  cpus: 2,
  refusedReasons: {
    '504 no answer by the deadline': 3686,
  },
  safeLearningEvents: [],
  canaryBaselineS: 120,
  canaryWindows: 8,
  nodeExclusions: 43,
  nodeExclusionsByRule: {
    'device:faulty': 43,
  },
  learnedDetector: {
    ambiguousSent: 1553,
    trainSent: 117,
    dropped: 0,
    anomalous: 0,
    normal: 0,
    stale: 0,
  },
  faults: null,
  meanLatencyMs: 948.9698954765586,
  p99LatencyMs: 4428.833684761686,
  perEap: [
    {
      eap: 0,
      sent: 5991,
      completedInTime: 4517,
      late: 202,
      refused: 1272,
      unanswered: 0,
      throughputRate: 0.7539642797529628,
      policy: 'cmmac',
      weightVersion: 5,
      placementVersion: 3,
      weightsApplied: 5,
      placementsApplied: 3,
      decisionsLearned: 5991,
      decisionsDrawn: 1509,
      decisionsFallback: 0,
      decidedToCloud: 2893,
      decisionsLight: 2000,
    },
  ],
} as unknown as UpSummary;

describe('formatSummary', () => {
  it('says the CPU competed only when no process died, and names the one that did instead', () => {
    const low = { ...run, vsEval: 0.6, loadAverage1m: 5, cpus: 2 };
    expect(formatSummary(low)).toMatch(/^note: load average 5 on 2 CPUs: the processes competed for CPU/m);
    const died = formatSummary({
      ...low,
      childExits: [{ name: 'agent 3', pid: 42, code: null, signal: 'SIGKILL', atS: 20, lastLine: '' }],
    });
    expect(died).toMatch(/^note: agent 3 exited during the run \(below\): the prediction has no such failure$/m);
    expect(died).not.toMatch(/competed for CPU/);
    expect(died).toMatch(/^ {2}agent 3 \(pid 42\) after 20 s: SIGKILL$/m);
    // near the prediction: no note at all
    expect(formatSummary(run)).not.toMatch(/^note:/m);
  });

  it('says what to try when live / predicted is just below the band at full speed on a small machine, and not otherwise', () => {
    const below = { ...run, vsEval: 0.962 };
    expect(formatSummary(below)).toMatch(
      /^note: live \/ predicted below 0\.97 at speed 1 on 2 CPUs, where one run varies by a few percent .*; --speed 0\.5 --duration 120 runs the same scenario time with half the CPU a second$/m,
    );
    for (const quiet of [
      { ...below, speed: 0.5 },
      { ...below, cpus: 16 },
      { ...below, vsEval: 0.97 },
    ])
      expect(formatSummary(quiet)).not.toMatch(/^note:/m);
    // far below: the CPU note or none, never this one (a few percent do not explain it)
    expect(formatSummary({ ...below, vsEval: 0.6, loadAverage1m: 5 })).not.toMatch(/one run varies/);
    expect(formatSummary({ ...below, vsEval: 0.6, loadAverage1m: 1 })).not.toMatch(/^note:/m);
  });

  it("says when the fault drill's version had no verdict by the end of the run, and not when it had one", () => {
    const ev = (tsMs: number, kind: string, message: string) => ({ tsMs, kind, eap: null, message });
    const inject = ev(
      20_000,
      'inject',
      'bad-weights drill: random weights handed to the publish path as weights v2 (no gate: to the canary)',
    );
    const waits = ev(
      20_001,
      'canary-baseline',
      'injected (bad-weights drill) version waits for a baseline under the main actor (122 s of it) before its canary: ...',
    );
    const start = ev(82_001, 'canary-start', 'injected (bad-weights drill) weights v2 to eAPs 0, 1 first (the others stay on v1); ...');
    // the default canary: up to 2 + 8 x 10 s after the drill, 2 + 120 s more when it waits for its baseline (204 s): 1.5 x 204, to 10 s
    const note =
      /^note: the drill's weights v2 had no verdict when the run ended \(it came at 20 s; a canary takes up to 82 s after it, 204 s when it waits for a baseline under the main actor\): --duration 310 leaves it time$/m;
    expect(formatSummary({ ...run, safeLearningEvents: [inject, waits] })).toMatch(note);
    expect(formatSummary({ ...run, safeLearningEvents: [inject, waits, start] })).toMatch(note);
    const rolledBack = ev(94_000, 'canary-rollback', "weights v2 rolled back after 1 window(s); every eAP gets v1's weights as v3: ...");
    expect(formatSummary({ ...run, safeLearningEvents: [inject, waits, start, rolledBack] })).not.toMatch(/^note:/m);
    // --canary-baseline 30: the wait is 32 s, the run it needs 1.5 x 114 s, to 10 s
    expect(formatSummary({ ...run, canaryBaselineS: 30, safeLearningEvents: [inject, waits] })).toMatch(
      /^note: .*\(it came at 20 s; a canary takes up to 82 s after it, 114 s when it waits for a baseline under the main actor\): --duration 180 leaves it time$/m,
    );
    // and --canary-windows 4: up to 2 + 4 x 10 s, 74 s with the wait: 1.5 x 74, to 10 s
    const short = { ...run, canaryBaselineS: 30, canaryWindows: 4, safeLearningEvents: [inject, waits] };
    expect(formatSummary(short)).toMatch(
      /^note: .*\(it came at 20 s; a canary takes up to 42 s after it, 74 s when it waits for a baseline under the main actor\): --duration 120 leaves it time$/m,
    );
    // a run of 100 s with the drill undecided: 1.5 x its length (more than the shortest drill run)
    expect(formatSummary({ ...short, durationS: 100 })).toMatch(/--duration 150 leaves it time$/m);
    // through the gate alone: its verdict is the last word; through the gate and then the canary, the canary's
    const gated = ev(21_000, 'gate-pass', 'weights v2 (current v1): candidate 0.99, current 0.99');
    const gateInject = {
      ...inject,
      message: 'same-weights drill: a copy of weights v1 handed to the publish path as weights v2 (through the gate)',
    };
    expect(formatSummary({ ...run, safeLearningEvents: [gateInject, gated] })).not.toMatch(/^note:/m);
    expect(formatSummary({ ...run, safeLearningEvents: [gateInject, gated, start] })).toMatch(note);
    // a drill that waited for the gate's arrivals to the end says so; one that waited, then came, is judged as above
    const gateWaits = ev(
      20_000,
      'inject',
      "bad-weights drill waits for the gate's live arrivals (0 of minRequests 500 held: the agents send only explored decisions, and none while the light actor dispatches)",
    );
    expect(formatSummary({ ...run, safeLearningEvents: [gateWaits] })).toMatch(
      /^note: the drill waited for the gate's live arrivals to the end of the run \(.*\): --load 1\.5 gives the gate arrivals$/m,
    );
    const rejected = ev(34_000, 'gate-reject', 'weights v2 (current v1): worse than the current version beyond margin 0.01: ...');
    expect(formatSummary({ ...run, safeLearningEvents: [gateWaits, { ...gateInject, tsMs: 33_000 }, rejected] })).not.toMatch(/^note:/m);
    // a drill skipped for want of a model names no version: nothing to say
    expect(
      formatSummary({
        ...run,
        safeLearningEvents: [ev(20_000, 'inject', 'bad-weights drill skipped: no stored model to take the shapes of')],
      }),
    ).not.toMatch(/^note:/m);
  });

  it('says what the online learner did, and why it did nothing when no explored decision reached it', () => {
    const line = /^kais eval predicts .* live \/ predicted = 0\.979 \((.*)\); with --view global/m;
    expect(formatSummary(run).match(line)?.[1]).toBe('learning online: 2048 explored decisions, 4 updates, 4 versions published');
    const idle = { ...run, learner: { transitionsRead: 0, updates: 0, published: 0 } };
    // the fixture's eAP: 2000 of its 5991 decisions by the light actor
    expect(formatSummary(idle).match(line)?.[1]).toBe(
      'learning online, but no explored decision reached the learner: the agents explore only where the main actor decides, and the light actor decided 2000 of 5991 decisions',
    );
    const allLight = { ...idle, perEap: run.perEap.map((e) => ({ ...e, decisionsLight: e.decisionsLearned })) };
    expect(formatSummary(allLight).match(line)?.[1]).toMatch(/the light actor decided every decision$/);
    const noLight = { ...idle, perEap: run.perEap.map((e) => ({ ...e, decisionsLight: 0 })) };
    expect(formatSummary(noLight).match(line)?.[1]).toBe('learning online, but no explored decision reached the learner');
    expect(formatSummary({ ...run, learner: null }).match(line)?.[1]).toBe('learning online');
    expect(formatSummary({ ...run, learning: false, learner: null })).toMatch(/live \/ predicted = 0\.979; with --view global/);
  });

  it("counts the light actor's decisions in each eAP's line when it made any", () => {
    expect(formatSummary(run)).toMatch(
      /^ {2}eAP 0: sent 5991, rate 75\.4%, policy decisions cmmac 5991 \(light actor 2000\) \/ fallback 0$/m,
    );
    const none = { ...run, perEap: run.perEap.map((e) => ({ ...e, decisionsLight: 0 })) };
    expect(formatSummary(none)).toMatch(/^ {2}eAP 0: sent 5991, rate 75\.4%, policy decisions cmmac 5991 \/ fallback 0$/m);
  });
});
