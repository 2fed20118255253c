/**
 * The load board (orchestrator/load-board.ts) and the agent's load report (agent/load-report.ts):
 * how reports of several agents combine, what a stale report counts, the window's integrals on a
 * hand-driven clock, and a report through the codec.
 */
import { LoadSampler } from '../../../agent/load-report';
import { LocalClusterView } from '../../../agent/local-view';
import { LoadBoard } from '../../../orchestrator/load-board';
import { Codec } from '../../../shared/protocol/codec';
import { makeFrame, type LoadBody } from '../../../shared/protocol/envelope';
import { loadScenario } from '../../../shared/scenario';

const scenario = loadScenario('small'); // 2 eAPs x 4 nodes, 8 services
const W = scenario.services.length;
const N = 8;

function body(
  rows: Record<number, { out?: number[]; busy?: number[]; waiting?: number[] }>,
  arrivals: number[] = [],
  endTs = 1000,
): LoadBody {
  const targets = Object.keys(rows)
    .map(Number)
    .sort((a, b) => a - b);
  const fill = (key: 'out' | 'busy' | 'waiting') => {
    const a = new Float32Array(targets.length * W);
    targets.forEach((t, r) => (rows[t][key] ?? []).forEach((x, w) => (a[r * W + w] = x)));
    return a;
  };
  const arr = Float32Array.from({ length: W }, (_, w) => arrivals[w] ?? 0);
  return {
    endTs,
    intervalMs: 1000,
    numServices: W,
    arrivals: arr,
    workCoreS: arr.map((a) => a * 0.5),
    targets: Int32Array.from(targets),
    outstanding: fill('out'),
    busy: fill('busy'),
    waiting: fill('waiting'),
  };
}

describe('LoadBoard', () => {
  test('sums the agents’ own outstanding requests, takes the largest estimate, clamps busy to the ready replicas', () => {
    let now = 0;
    const board = new LoadBoard({ scenario, now: () => now });
    const ready = Array.from({ length: W }, () => new Array<number>(N).fill(0));
    ready[0][1] = 2;
    ready[1][1] = 3;
    board.ready = () => ready;
    // eAP 0: 1 own request of w0 at node 1, no node report; eAP 1: 2 own, no report -> 3 in all
    board.add(0, body({ 1: { out: [1], busy: [1] } }), 1000);
    board.add(1, body({ 1: { out: [2], busy: [2] } }), 1000);
    let r = board.read();
    expect(r.busy[1 * W + 0]).toBe(2); // min(ready 2, max(2, 3))
    expect(r.waiting[1 * W + 0]).toBe(1); // 3 - 2
    // a node report seen by eAP 0 (3 busy of w1 node-wide, 4 waiting): the largest, not the sum
    board.add(0, body({ 1: { out: [1, 1], busy: [1, 3], waiting: [0, 4] } }), 1000);
    board.add(1, body({ 1: { out: [2, 0], busy: [2, 3], waiting: [0, 4] } }), 1000);
    r = board.read();
    expect(r.busy[1 * W + 1]).toBe(3);
    expect(r.waiting[1 * W + 1]).toBe(4);
    // an agent silent for longer than staleMs counts as nothing
    now = 6000;
    r = board.read();
    expect(r.busy[1 * W + 0]).toBe(0);
  });

  test('the window: arrivals summed, busy and ready replica-seconds integrated sample-and-hold in scenario seconds', () => {
    let now = 0;
    const board = new LoadBoard({ scenario, speed: 10, now: () => now });
    const ready = Array.from({ length: W }, () => new Array<number>(N).fill(0));
    ready[2][0] = 2;
    board.ready = () => ready;
    board.add(0, body({ 0: { out: [0, 0, 1], busy: [0, 0, 1] } }, [0, 0, 5]), 1000);
    now = 1000; // 1 real s = 10 scenario s at 1 busy, 2 ready
    board.add(0, body({ 0: { out: [0, 0, 2], busy: [0, 0, 2] } }, [0, 0, 7]), 1000);
    now = 1500; // 5 scenario s at 2 busy
    const win = board.read().window;
    expect(win.windowS).toBeCloseTo(15);
    expect(win.arrivals[2]).toBe(12);
    expect(win.workCoreS[2]).toBeCloseTo(6);
    expect(win.busyReplicaS[2]).toBeCloseTo(10 * 1 + 5 * 2);
    expect(win.readyReplicaS[2]).toBeCloseTo(15 * 2);
  });

  test('the window counts the agents’ answers in time and not (completedInTime, failed); a report without them adds none', () => {
    const board = new LoadBoard({ scenario, now: () => 0 });
    const outcomes = (inTime: number[], failed: number[]) => ({
      ...body({}, [5]),
      completedInTime: Float32Array.from({ length: W }, (_, w) => inTime[w] ?? 0),
      failed: Float32Array.from({ length: W }, (_, w) => failed[w] ?? 0),
    });
    board.add(0, outcomes([3, 1], [2]), 1000);
    board.add(1, outcomes([4], [0, 2]), 1000);
    board.add(1, body({}, [5]), 1000); // an agent from before 2026-12-04
    const win = board.read().window;
    expect(win.arrivals[0]).toBe(15);
    expect([win.completedInTime[0], win.completedInTime[1], win.failed[0], win.failed[1]]).toEqual([7, 1, 2, 2]);
  });

  test('a report buffered while the link was down adds its counts, not its figures', () => {
    const board = new LoadBoard({ scenario, now: () => 0 });
    board.add(0, body({ 3: { out: [4], busy: [4] } }, [9], 1000), 1000 + 60_000); // sent a minute after its interval
    const r = board.read();
    expect(r.busy[3 * W]).toBe(0);
    expect(r.window.arrivals[0]).toBe(9);
    expect(board.stats).toEqual({ reports: 1, stale: 1 });
  });
});

describe('LoadSampler', () => {
  test('means of the agent view’s figures per (target, service), only targets with load, through the codec', () => {
    let clock = 0;
    const view = new LocalClusterView(scenario, 0, 1, 2, 1, () => clock);
    view.applyPlacement({ version: 1, frame: 0, numServices: W, numNodes: N, replicas: Int32Array.from({ length: W * N }, () => 1) });
    let ms = 0;
    const sampler = new LoadSampler(scenario, view, () => ms);
    sampler.arrival(3);
    sampler.arrival(3, 2);
    sampler.answered(3, true);
    sampler.answered(3, false);
    sampler.answered(5, true);
    view.onSent(2, 3);
    view.onSent(2, 3); // 2 outstanding, 1 replica: 1 busy, 1 waiting
    sampler.sample();
    view.onDone(2, 3, 0.1, null);
    view.onDone(2, 3, 0.1, null); // then none
    ms = 1000;
    clock = 1;
    const b = sampler.take(5000);
    expect(Array.from(b.targets)).toEqual([2]);
    expect(b.outstanding[3]).toBeCloseTo(1); // (2 + 0) / 2 samples
    expect(b.busy[3]).toBeCloseTo(0.5);
    expect(b.waiting[3]).toBeCloseTo(0.5);
    expect(b.arrivals[3]).toBe(2);
    expect(b.workCoreS[3]).toBeCloseTo(0.12 * scenario.services[3].workScale + 2);
    expect(b.intervalMs).toBe(1000);
    expect([b.completedInTime![3], b.failed![3], b.completedInTime![5], b.failed![5]]).toEqual([1, 1, 1, 0]);
    const codec = new Codec();
    const r = codec.decode(codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: b })));
    expect(r.ok).toBe(true);
    if (r.ok && r.frame.type === 'telemetry') expect(r.frame.body.load).toEqual(b);
    // the next interval starts empty
    const next = sampler.take();
    expect(next.targets.length).toBe(0);
    expect(next.completedInTime!.every((x) => x === 0) && next.failed!.every((x) => x === 0)).toBe(true);
  });

  test('the codec refuses a load section whose arrays do not fit', () => {
    const codec = new Codec();
    const b = body({ 1: { busy: [1] } });
    const bad = { ...b, busy: new Float32Array(3) };
    expect(() => codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: bad }))).toThrow(/load\.busy/);
    const unordered = { ...body({ 1: {}, 2: {} }), targets: Int32Array.from([2, 1]) };
    expect(() => codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: unordered }))).toThrow(/load\.targets/);
    const half = { ...b, completedInTime: new Float32Array(W) };
    expect(() => codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: half }))).toThrow(/load\.failed.*come together/);
    const negative = { ...b, completedInTime: new Float32Array(W), failed: new Float32Array(W).fill(-1) };
    expect(() => codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: negative }))).toThrow(/load\.failed/);
    // a report without them (an older agent) still decodes
    const r = codec.decode(codec.encode(makeFrame('telemetry', 1, { eap: 0, samples: [], load: b })));
    expect(r.ok && r.frame.type === 'telemetry' && r.frame.body.load?.completedInTime).toBeUndefined();
  });
});
