/**
 * `kais train --curriculum` and `--filters` on the `tiny` scenario through the real CLI (dist/kais.js,
 * built by `npm test` before jest runs): lessons in order with the reason each ended, the lesson
 * stored in the checkpoint so that a run killed mid-lesson resumes to the same numbers, one-line
 * exit 2 for bad lesson files, and the device filters in the training loop.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Database from 'better-sqlite3';
import { expectUsageExit, killKaisWhen, runKais } from '../support/cli';
import { reproducibleMetrics } from '../support/train-db';
import { writeSyntheticTrace } from '../support/trace';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-curriculum-'));

const kais = (...args: string[]) => runKais(args);

function read(file: string): { metrics: Record<string, unknown>[]; meta: Record<string, unknown>; config: Record<string, unknown> } {
  const db = new Database(file, { readonly: true });
  const metrics = reproducibleMetrics(db);
  const meta = Object.fromEntries(
    (db.prepare("SELECT key, value FROM meta WHERE key != 'format'").all() as { key: string; value: string }[]).map((r) => [
      r.key,
      JSON.parse(r.value),
    ]),
  );
  db.close();
  const { config, ...others } = meta;
  return { metrics, meta: others, config };
}

/** A two-lesson curriculum: cloning on periodic load with a fixed placement, then RL on P4 with hpa. */
function writeLessons(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const common = { scenario: 'tiny', load: 1, promotion: { plateauEpisodes: 5, minImprovement: 0.01 } };
  fs.writeFileSync(
    path.join(dir, '01-clone.json'),
    JSON.stringify({
      ...common,
      name: '01-clone',
      workload: 'p1',
      episodeFrames: 1,
      orchestration: 'static',
      maxEpisodes: 2,
      teacher: 'deadline-load',
      checkpointOut: 'cloned',
    }),
  );
  fs.writeFileSync(
    path.join(dir, '02-rl.json'),
    JSON.stringify({
      ...common,
      name: '02-rl',
      workload: 'p4',
      episodeFrames: 2,
      orchestration: 'hpa',
      maxEpisodes: 2,
      lr: 2e-4,
      checkpointIn: 'cloned',
      checkpointOut: 'tuned',
    }),
  );
}

const lessonsDir = path.join(tmp, 'lessons');
const args = ['train', '--scenario', 'tiny', '--curriculum', lessonsDir, '--seed', '5', '--eval-every', '2'];

describe('kais train --curriculum (smoke, tiny scenario)', () => {
  beforeAll(() => writeLessons(lessonsDir));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('trains through the lessons in order and logs when each starts and why it ended', () => {
    const out = path.join(tmp, 'whole.db');
    const r = kais(...args, '--out', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/lesson 1\/2 "01-clone" starts at frame 0: p1 x1, 1-frame episodes, static, edf, cloning deadline-load/);
    expect(r.stderr).toMatch(/lesson 1\/2 "01-clone" ended after 2 episodes \(frame 2\): budget/);
    expect(r.stderr).toMatch(
      /lesson 2\/2 "02-rl" starts at frame 2: p4 x1, 2-frame episodes, hpa, edf, RL, at most 2 episodes, from checkpoint "cloned"/,
    );
    expect(r.stderr).toMatch(/lesson 2\/2 "02-rl" ended after 2 episodes \(frame 6\): budget/);
    // the progress bar names the lesson
    expect(r.stderr).toMatch(/lesson 2\/2 02-rl ep 2\/2 \| frame 6\/6 \[rl\]/);
    const { metrics, meta, config } = read(out);
    expect(metrics.map((m) => [m.lesson, m.phase])).toEqual([
      ['01-clone', 'bc'],
      ['01-clone', 'bc'],
      ['02-rl', 'rl'],
      ['02-rl', 'rl'],
      ['02-rl', 'rl'],
      ['02-rl', 'rl'],
    ]);
    expect(meta.lessons).toMatchObject([
      { name: '01-clone', startFrame: 0, endFrame: 2, reason: 'budget' },
      { name: '02-rl', startFrame: 2, endFrame: 6, reason: 'budget' },
    ]);
    // each label: where the lesson ended and the checkpoint of its best held-out evaluation
    expect(meta.labels).toEqual({
      cloned: { episode: 1, frame: 2, best: { episode: 1, frame: 2 } },
      tuned: { episode: 3, frame: 6, best: bestOf(metrics, 2, 6) },
    });
    expect((config.lessons as unknown[]).length).toBe(2);
  });

  it('resumes a run killed with SIGKILL inside the second lesson in that lesson, with the same numbers', async () => {
    const killed = path.join(tmp, 'killed.db');
    await killKaisWhen([...args, '--out', killed], /frame 5\/6/); // inside the second episode of lesson 2
    expect(read(killed).metrics.length).toBeLessThan(6); // it really died before the end
    // no --curriculum: a resume trains the lessons stored with the run
    const r = kais('train', '--scenario', 'tiny', '--out', killed, '--resume');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/resuming .* \(4 frames done, in lesson 2\/2 "02-rl" after 1 of its episodes\)/);
    expect(r.stderr).not.toMatch(/lesson 1\/2/);
    const [a, b] = [read(killed), read(path.join(tmp, 'whole.db'))];
    expect(a.metrics).toEqual(b.metrics);
    expect(a.meta).toEqual(b.meta); // lessons with their reasons, checkpoint labels, best evaluation
  });

  it('starts a lesson from the best evaluation of the lesson it names with "checkpointFrom": "best"', () => {
    // lesson 1: RL on P4, five 1-frame episodes, each evaluated; lesson 2 starts from its best, not its end
    const dir = path.join(tmp, 'from-best');
    fs.mkdirSync(dir);
    const common = {
      scenario: 'tiny',
      load: 1,
      workload: 'p4',
      orchestration: 'hpa',
      promotion: { plateauEpisodes: 9, minImprovement: 0 },
    };
    fs.writeFileSync(
      path.join(dir, '01-rl.json'),
      JSON.stringify({ ...common, name: '01-rl', episodeFrames: 1, maxEpisodes: 5, lr: 3e-3, checkpointOut: 'rl' }),
    );
    const second = { ...common, name: '02-next', episodeFrames: 1, maxEpisodes: 1, checkpointIn: 'rl', checkpointOut: 'next' };
    fs.writeFileSync(path.join(dir, '02-next.json'), JSON.stringify({ ...second, checkpointFrom: 'best' }));
    const out = path.join(tmp, 'from-best.db');
    const r = kais('train', '--scenario', 'tiny', '--curriculum', dir, '--seed', '3', '--eval-every', '1', '--out', out);
    expect(r.code).toBe(0);
    const { metrics, meta } = read(out);
    const best = bestOf(metrics, 0, 5);
    expect(best.frame).toBeLessThan(5); // the seed gives a lesson whose best is not its end, else this test shows nothing
    expect((meta.labels as Record<string, unknown>).rl).toEqual({ episode: 4, frame: 5, best });
    expect(r.stderr).toContain(
      `lesson 2/2 "02-next" starts at frame 5: p4 x1, 1-frame episodes, hpa, edf, RL, at most 1 episodes, from checkpoint "rl" (its best evaluation, frame ${best.frame})`,
    );
    // the same lessons from the end of lesson 1: the same first lesson, another second one
    fs.writeFileSync(path.join(dir, '02-next.json'), JSON.stringify(second));
    const lastOut = path.join(tmp, 'from-last.db');
    const l = kais('train', '--scenario', 'tiny', '--curriculum', dir, '--seed', '3', '--eval-every', '1', '--out', lastOut);
    expect(l.code).toBe(0);
    expect(l.stderr).toContain('from checkpoint "rl" (where that lesson ended, frame 5)');
    const fromLast = read(lastOut).metrics;
    expect(fromLast.slice(0, 5)).toEqual(metrics.slice(0, 5));
    expect(fromLast[5]['charts/evalThroughputRate']).not.toEqual(metrics[5]['charts/evalThroughputRate']);
  });

  it('keeps a stopped curriculum run resumable with more frames (a cap on an episode boundary)', () => {
    const parts = path.join(tmp, 'parts.db');
    const first = kais(...args, '--out', parts, '--frames', '2');
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/"01-clone" ended after 2 episodes/);
    expect(first.stderr).not.toMatch(/"02-rl" starts/);
    const r = kais('train', '--scenario', 'tiny', '--out', parts, '--resume', '--frames', '6');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/in lesson 2\/2 "02-rl" after 0 of its episodes/);
    expect(read(parts).metrics).toEqual(read(path.join(tmp, 'whole.db')).metrics);
  });

  describe('bad lesson files: exit 2 with one line naming the file and the problem, nothing written', () => {
    const cases: [string, (dir: string) => void, RegExp][] = [
      [
        'an unknown workload',
        (d) => edit(d, '02-rl.json', { workload: 'p9' }),
        /02-rl\.json: field "workload" must be one of p1, p2, p3, p4, mixed, got "p9"/,
      ],
      ['a misspelt field', (d) => edit(d, '01-clone.json', { maxEpisode: 3 }), /01-clone\.json: field "maxEpisode" is not a lesson field/],
      ['a negative load', (d) => edit(d, '01-clone.json', { load: -1 }), /01-clone\.json: field "load" must be a number/],
      [
        'a checkpointIn nobody writes',
        (d) => edit(d, '02-rl.json', { checkpointIn: 'nowhere' }),
        /02-rl\.json: field "checkpointIn" names "nowhere"/,
      ],
      [
        'a checkpointFrom other than last or best',
        (d) => edit(d, '02-rl.json', { checkpointFrom: 'first' }),
        /02-rl\.json: field "checkpointFrom" must be "last" or "best", got "first"/,
      ],
      ['an unknown orchestration', (d) => edit(d, '02-rl.json', { orchestration: 'nope' }), /02-rl\.json: field "orchestration"/],
      ['an unknown teacher', (d) => edit(d, '01-clone.json', { teacher: 'nope' }), /01-clone\.json: field "teacher"/],
      [
        'another scenario than the run',
        (d) => edit(d, '02-rl.json', { scenario: 'small' }),
        /02-rl\.json: field "scenario" is "small", but this run trains scenario "tiny"/,
      ],
      [
        'a missing trace file',
        (d) => edit(d, '02-rl.json', { trace: 'no-such.csv' }),
        /02-rl\.json: field "trace": .*no-such\.csv does not exist/,
      ],
      [
        'a trace window upside down',
        (d) => edit(d, '02-rl.json', { trace: '01-clone.json', traceWindowS: [5, 1] }),
        /02-rl\.json: field "traceWindowS" must be \[from, to\]/,
      ],
      ['broken JSON', (d) => fs.writeFileSync(path.join(d, '01-clone.json'), '{"name": '), /01-clone\.json: not a readable JSON lesson/],
      [
        'a cloud of no VMs',
        (d) => edit(d, '02-rl.json', { cloudVms: 0 }),
        /02-rl\.json: field "cloudVms" must be a whole number of VMs in \[1, 1000000\] or \[min, max\] of them with min < max, got 0/,
      ],
      // a later lesson's trace is read when the run starts, not after the lessons before it trained
      [
        "a trace window holding none of the trace's rows",
        (d) => edit(d, '02-rl.json', { trace: writeSyntheticTrace(path.join(d, 'tasks.csv')), traceWindowS: [1e9, 1e9 + 1] }),
        /02-rl\.json: field "traceWindowS" \[1000000000, 1000000001\] holds no rows of the trace .*tasks\.csv/,
      ],
      [
        'a binary trace',
        (d) => {
          fs.writeFileSync(path.join(d, 'bin.csv'), Buffer.from([1, 0, 2, 0, 10]));
          edit(d, '02-rl.json', { trace: 'bin.csv' });
        },
        /02-rl\.json: field "trace": .*bin\.csv holds binary data, not a batch_task CSV/,
      ],
      [
        'a trace folder without batch_task.csv',
        (d) => {
          fs.mkdirSync(path.join(d, 'no-tasks'));
          edit(d, '02-rl.json', { trace: 'no-tasks' });
        },
        /02-rl\.json: field "trace": folder .*no-tasks holds no batch_task\.csv/,
      ],
      [
        'a misspelt promotion field',
        (d) => edit(d, '01-clone.json', { promotion: { treshold: 0.9, plateauEpisodes: 5, minImprovement: 0.01 } }),
        /01-clone\.json: field "promotion\.treshold" is not a promotion field \(valid: threshold, plateauEpisodes, minImprovement\)/,
      ],
      [
        "another lesson's checkpointOut",
        (d) => edit(d, '02-rl.json', { checkpointOut: 'cloned' }),
        /02-rl\.json: field "checkpointOut" is "cloned", which .*01-clone\.json writes already/,
      ],
      [
        "a load above --load's cap",
        (d) => edit(d, '01-clone.json', { load: 101 }),
        /01-clone\.json: field "load" must be a number in \[0\.000001, 100\], got 101/,
      ],
      [
        'episodes too long to hold in memory',
        (d) => edit(d, '02-rl.json', { episodeFrames: 100000 }),
        /02-rl\.json: field "episodeFrames" must be an integer in \[1, 50\], got 100000/,
      ],
    ];
    it.each(cases)('%s', (_what, spoil, message) => {
      const dir = fs.mkdtempSync(path.join(tmp, 'bad-'));
      writeLessons(dir);
      spoil(dir);
      const out = path.join(dir, 'never.db');
      const r = kais('train', '--scenario', 'tiny', '--curriculum', dir, '--out', out);
      expectUsageExit(r, message, out);
    });
  });

  it('refuses to resume into a stored lesson whose trace is gone, naming the lesson and what to do', () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'gone-'));
    writeLessons(dir);
    const csv = writeSyntheticTrace(path.join(dir, 'tasks.csv'));
    edit(dir, '02-rl.json', { trace: 'tasks.csv', traceWindowS: [0, 299] });
    const out = path.join(dir, 'gone.db');
    // stopped by --frames in the first lesson, then the trace of the second goes away
    expect(kais('train', '--scenario', 'tiny', '--curriculum', dir, '--eval-every', '0', '--frames', '1', '--out', out).code).toBe(0);
    fs.rmSync(csv);
    const before = fs.statSync(out).mtimeMs;
    const r = kais('train', '--scenario', 'tiny', '--resume', '--frames', '6', '--out', out);
    expectUsageExit(
      r,
      /--resume .*gone\.db: stored lesson 2 "02-rl" \(.*02-rl\.json\) field "trace": cannot read .*tasks\.csv: ENOENT; put the trace back at .*tasks\.csv, or start a new run/,
    );
    expect(fs.statSync(out).mtimeMs).toBe(before);
  });

  it("simulates the lesson's cloud (cloudVms) in its training episodes, and the run's cloud everywhere else", () => {
    // the same two lessons with a four-VM cloud (tiny has one) in the RL lesson, drawn from [2, 4] in another run
    const runWith = (cloudVms: number | [number, number], name: string) => {
      const dir = path.join(tmp, name);
      writeLessons(dir);
      edit(dir, '02-rl.json', { cloudVms });
      const out = path.join(tmp, `${name}.db`);
      const r = kais('train', '--scenario', 'tiny', '--curriculum', dir, '--seed', '5', '--eval-every', '2', '--out', out);
      expect(r.code).toBe(0);
      return { stderr: r.stderr, metrics: read(out).metrics };
    };
    const whole = read(path.join(tmp, 'whole.db')).metrics;
    const four = runWith(4, 'cloud4');
    expect(four.stderr).toMatch(
      /lesson 2\/2 "02-rl" starts at frame 2: p4 x1, 2-frame episodes, hpa, edf, RL, at most 2 episodes, a cloud of 4 VMs/,
    );
    expect(four.stderr).not.toMatch(/lesson 1\/2 .* a cloud of/);
    // lesson 1 is the same run; lesson 2's episodes ran on a larger cloud: more requests served in time
    expect(four.metrics.slice(0, 2)).toEqual(whole.slice(0, 2));
    const inTime = (ms: Record<string, unknown>[]) => ms.slice(2).reduce((a, m) => a + (m['charts/inTimeShare'] as number), 0);
    expect(inTime(four.metrics)).toBeGreaterThan(inTime(whole));
    // a range: drawn per episode from the run's seed, so the same run twice gives the same numbers
    const range = runWith([2, 4], 'cloud2-4');
    expect(range.stderr).toMatch(/a cloud of 2-4 VMs/);
    expect(runWith([2, 4], 'cloud2-4-again').metrics).toEqual(range.metrics);
  });

  it('replays a window of a trace in a lesson, each episode from another start', () => {
    const dir = path.join(tmp, 'trace');
    fs.mkdirSync(dir);
    writeSyntheticTrace(path.join(dir, 'tasks.csv'));
    fs.writeFileSync(
      path.join(dir, '01-trace.json'),
      JSON.stringify({
        name: '01-trace',
        scenario: 'tiny',
        workload: 'p4',
        trace: 'tasks.csv',
        traceWindowS: [0, 299],
        load: 1,
        episodeFrames: 1,
        orchestration: 'hpa',
        maxEpisodes: 2,
        promotion: { plateauEpisodes: 2, minImprovement: 0 },
        checkpointOut: 'trace',
      }),
    );
    const out = path.join(dir, 'trace.db');
    const r = kais('train', '--scenario', 'tiny', '--curriculum', dir, '--seed', '2', '--eval-every', '0', '--out', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/lesson 1\/1 "01-trace" starts at frame 0: trace .*tasks\.csv \[0, 299\] s x1/);
    expect(r.stderr).toMatch(/"01-trace" ended after 2 episodes \(frame 2\): budget/);
    const { metrics } = read(out);
    expect(metrics).toHaveLength(2);
    // two different stretches of the window: not the same arrivals twice
    expect(metrics[0]['charts/decisions']).not.toEqual(metrics[1]['charts/decisions']);
  });

  it('--eval-trace: a second validation set on a trace window, best chosen by the mean of the two; bad input exits 2 naming the flag', () => {
    const dir = path.join(tmp, 'evaltrace');
    fs.mkdirSync(dir);
    const csv = writeSyntheticTrace(path.join(dir, 'tasks.csv'));
    const base = [
      'train',
      '--scenario',
      'tiny',
      '--episode-frames',
      '1',
      '--bc-frames',
      '1',
      '--frames',
      '2',
      '--seed',
      '3',
      '--eval-every',
      '1',
    ];
    const out = path.join(dir, 'on.db');
    const r = kais(...base, '--eval-trace', csv, '--eval-trace-window', '300,399', '--out', out);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /eval after 1 frames: cmmac\/hpa throughput rate [\d.]+ \(held-out seed\), trace window \[300, 399\] s [\d.]+, selection score \(mean\) [\d.]+/,
    );
    const a = read(out);
    expect(a.config).toMatchObject({ evalTrace: csv, evalTraceWindowS: [300, 399] });
    const evals = a.metrics.filter((m) => m['charts/evalScore'] !== undefined);
    expect(evals).toHaveLength(2);
    for (const m of evals) {
      const mean = ((m['charts/evalThroughputRate'] as number) + (m['charts/evalTraceThroughputRate'] as number)) / 2;
      expect(m['charts/evalScore'] as number).toBeCloseTo(mean, 4);
    }
    const bestScore = Math.max(...evals.map((m) => m['charts/evalScore'] as number));
    expect((a.meta.best as { eval: number }).eval).toBe(bestScore);
    // the same run again: the same numbers (the validation draws nothing from the training streams)
    const again = path.join(dir, 'again.db');
    expect(kais(...base, '--eval-trace', csv, '--eval-trace-window', '300,399', '--out', again).code).toBe(0);
    expect(read(again).metrics).toEqual(a.metrics);
    // without it: the training frames are the same, the selection uses the workload alone
    const off = path.join(dir, 'off.db');
    expect(kais(...base, '--out', off).code).toBe(0);
    const b = read(off);
    expect(b.config.evalTrace).toBeNull();
    expect(b.metrics.map((m) => m['charts/throughputRate'])).toEqual(a.metrics.map((m) => m['charts/throughputRate']));
    expect(b.metrics.some((m) => m['charts/evalScore'] !== undefined)).toBe(false);
    // a curriculum folder's validation.json is the default; --eval-trace none turns it off
    const cur = path.join(dir, 'cur');
    writeLessons(cur);
    fs.writeFileSync(path.join(cur, 'validation.json'), JSON.stringify({ trace: '../tasks.csv', traceWindowS: [0, 299] }));
    const c1 = path.join(dir, 'cur.db');
    expect(kais('train', '--scenario', 'tiny', '--curriculum', cur, '--frames', '2', '--eval-every', '2', '--out', c1).code).toBe(0);
    expect(read(c1).config).toMatchObject({ evalTrace: csv, evalTraceWindowS: [0, 299] });
    const c2 = path.join(dir, 'cur-none.db');
    expect(
      kais('train', '--scenario', 'tiny', '--curriculum', cur, '--frames', '2', '--eval-every', '2', '--eval-trace', 'none', '--out', c2)
        .code,
    ).toBe(0);
    expect(read(c2).config.evalTrace).toBeNull();
    const bad: [string[], RegExp][] = [
      [['--eval-trace', csv, '--eval-trace-window', '5,1'], /^kais: --eval-trace-window: expected from,to/],
      [['--eval-trace-window', '0,299'], /^kais: --eval-trace-window: needs --eval-trace/],
      [['--eval-trace', path.join(dir, 'gone.csv')], /^kais: --eval-trace: .*gone\.csv does not exist/],
      [
        ['--eval-trace', csv, '--eval-trace-window', '1000,2000'],
        /^kais: --eval-trace: .*tasks\.csv has no rows in the window \[1000, 2000\]/,
      ],
    ];
    for (const [flags, message] of bad) {
      const never = path.join(dir, 'never.db');
      const e = kais(...base, ...flags, '--out', never);
      expectUsageExit(e, message, never);
    }
    // a validation.json window with no rows: the line names the file and its field, not --eval-trace (not given)
    const emptyWindow = path.join(dir, 'cur-empty');
    writeLessons(emptyWindow);
    fs.writeFileSync(path.join(emptyWindow, 'validation.json'), JSON.stringify({ trace: '../tasks.csv', traceWindowS: [1000, 2000] }));
    const never = path.join(dir, 'never.db');
    expectUsageExit(
      kais('train', '--scenario', 'tiny', '--curriculum', emptyWindow, '--frames', '2', '--out', never),
      /^kais: --curriculum \S+cur-empty\/validation\.json: field "traceWindowS" \[1000, 2000\] holds no rows of the trace \S+tasks\.csv/,
      never,
    );
  });

  it('refuses single-lesson flags next to a curriculum (kais train on kais runs the shipped lessons by default)', () => {
    const r = kais('train', '--scenario', 'kais', '--episode-frames', '2', '--out', path.join(tmp, 'never.db'));
    expectUsageExit(
      r,
      /--episode-frames\/--bc-frames: a curriculum sets these per lesson .* --curriculum none/,
      path.join(tmp, 'never.db'),
    );
  });

  it('refuses the shipped lessons (written for kais) on another scenario', () => {
    const r = kais('train', '--scenario', 'tiny', '--curriculum', 'default', '--out', path.join(tmp, 'default.db'));
    expectUsageExit(r, /field "scenario" is "kais", but this run trains scenario "tiny"/);
  });
});

/** The episode and frame of the best held-out evaluation among metrics rows [from, to) (the earlier of equal ones). */
function bestOf(metrics: Record<string, unknown>[], from: number, to: number): { episode: number; frame: number } {
  let best: { episode: number; frame: number; rate: number } | null = null;
  for (const m of metrics.slice(from, to)) {
    const rate = m['charts/evalThroughputRate'] as number | undefined;
    // a row is one frame (0-based); a label counts frames done, so the episode's checkpoint is row + 1
    if (rate !== undefined && (best === null || rate > best.rate))
      best = { episode: m.episode as number, frame: (m.frame as number) + 1, rate };
  }
  if (!best) throw new Error(`no evaluation in frames ${from}..${to}`);
  return { episode: best.episode, frame: best.frame };
}

function edit(dir: string, file: string, patch: Record<string, unknown>): void {
  const f = path.join(dir, file);
  fs.writeFileSync(f, JSON.stringify({ ...(JSON.parse(fs.readFileSync(f, 'utf8')) as object), ...patch }));
}

describe('kais train --filters', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-filters-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('runs the device filters on simulated telemetry in training and reports their false exclusions', () => {
    const base = [
      'train',
      '--scenario',
      'tiny',
      '--episode-frames',
      '2',
      '--bc-frames',
      '1',
      '--frames',
      '2',
      '--seed',
      '3',
      '--eval-every',
      '2',
    ];
    const on = path.join(dir, 'on.db');
    const off = path.join(dir, 'off.db');
    const r = kais(...base, '--filters', '--out', on);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/device filters: false exclusion rate [\d.]+ in episode 0/);
    expect(kais(...base, '--out', off).code).toBe(0);
    const a = read(on);
    const b = read(off);
    expect(a.config.filters).toBe(true);
    expect(b.config.filters).toBe(false);
    expect(a.metrics[1]['charts/falseExclusionRate']).toEqual(expect.any(Number));
    expect(b.metrics[1]['charts/falseExclusionRate']).toBeUndefined();
    // filtered nodes change the masks, so the dispatch and the numbers differ
    expect(a.metrics).not.toEqual(b.metrics);
  });
});
