/**
 * orchestrator/prediction.ts: the simulator's prediction of a run as the orchestrator reads it
 * (config `prediction`): checked field by field (exit 2, one line naming the file and the field),
 * its frames laid on the wall clock by the run's start and speed, read again when `kais up`
 * writes the start into it.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { readConfig } from '../../../orchestrator/main';
import {
  parsePrediction,
  predictedFrame,
  predictedInTime,
  PredictionFile,
  readPrediction,
  writePrediction,
  type Prediction,
} from '../../../orchestrator/prediction';
import { UsageError } from '../../../shared/errors';

const KAIS = path.resolve(__dirname, '../../..', 'dist', 'kais.js');
const START = 1_000_000;
const base: Prediction = {
  policy: 'lec/static',
  throughputRate: 0.5,
  frameS: 25,
  arrivedPerFrame: [200, 300, 200],
  completedInTimePerFrame: [100, 200, 50],
  startMs: START,
};

let dir: string;
beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-prediction-'))));
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('predictedInTime', () => {
  // speed 2: a frame of 25 scenario seconds lasts 12.5 s of wall clock
  it('spreads each frame over its wall-clock span and sums the covered shares', () => {
    expect(predictedInTime(base, 2, START, START + 2000)).toBeCloseTo(16); // 100 x 0.16: 8 in time per wall second
    expect(predictedInTime(base, 2, START + 12_000, START + 14_000)).toBeCloseTo(100 * 0.04 + 200 * 0.12);
    expect(predictedInTime(base, 2, START, START + 37_500)).toBeCloseTo(350); // the whole run
    expect(predictedInTime(base, 2, START - 10_000, START + 37_500 + 10_000)).toBeCloseTo(350);
  });

  it('is null before the start, after the last frame, and while the start is unknown', () => {
    expect(predictedInTime(base, 2, START - 4000, START - 2000)).toBeNull();
    expect(predictedInTime(base, 2, START + 37_500, START + 40_000)).toBeNull();
    expect(predictedInTime({ ...base, startMs: null }, 2, START, START + 2000)).toBeNull();
  });

  it('names the frame of a wall-clock time', () => {
    expect(predictedFrame(base, 2, START - 1)).toBeNull();
    expect(predictedFrame(base, 2, START + 12_499)).toEqual({ frame: 0, over: false });
    expect(predictedFrame(base, 2, START + 12_500)).toEqual({ frame: 1, over: false });
    expect(predictedFrame(base, 2, START + 37_500)).toEqual({ frame: 3, over: true });
  });
});

describe('the prediction file', () => {
  it.each([
    [{ policy: '' }, /field "policy" must be a name/],
    [{ throughputRate: 1.2 }, /field "throughputRate" must be a share in \[0, 1\], got 1.2/],
    [{ frameS: 0 }, /field "frameS" must be seconds in \(0, 86400\], got 0/],
    [{ arrivedPerFrame: [] }, /field "arrivedPerFrame" must be a list of 1\.\.\d+ counts/],
    [{ completedInTimePerFrame: [1, -2, 3] }, /field "completedInTimePerFrame\[1\]" must be a count >= 0, got -2/],
    [{ completedInTimePerFrame: [1, 2] }, /field "completedInTimePerFrame" must have one count per frame, as arrivedPerFrame \(3\), got 2/],
    [{ startMs: 'now' }, /field "startMs" must be null or a time in ms since the epoch, got "now"/],
    [{ colour: 'red' }, /field "colour" is not a field of a prediction/],
  ])('refuses %j with one line naming the file and the field', (change, msg) => {
    expect(() => parsePrediction({ ...base, ...change }, 'p.json')).toThrow(UsageError);
    expect(() => parsePrediction({ ...base, ...change }, 'p.json')).toThrow(msg);
    expect(() => parsePrediction({ ...base, ...change }, 'p.json')).toThrow(/^p\.json: field "/);
  });

  it('is read again when kais up writes the start into it, and keeps the last good one when it turns bad', () => {
    const f = path.join(dir, 'p.json');
    writePrediction(f, { ...base, startMs: null });
    const logs: string[] = [];
    const pf = new PredictionFile(f, readPrediction(f), (l) => logs.push(l));
    expect(pf.current(START).startMs).toBeNull();
    writePrediction(f, { ...base, startMs: START + 5 });
    expect(pf.current(START + 500).startMs).toBeNull(); // checked at most once a second
    expect(pf.current(START + 1500).startMs).toBe(START + 5);
    fs.writeFileSync(f, JSON.stringify({ ...base, frameS: -1 }));
    expect(pf.current(START + 3000)).toMatchObject({ startMs: START + 5, frameS: 25 });
    expect(logs).toEqual([expect.stringMatching(/p\.json: field "frameS" must be seconds .*; keeping the one read before/)]);
  });
});

describe('config "prediction"', () => {
  const config = (prediction: unknown) => {
    const f = path.join(dir, 'c.json');
    fs.writeFileSync(f, JSON.stringify({ scenario: 'tiny', prediction }));
    return f;
  };

  it('reads the file relative to the config file', () => {
    fs.mkdirSync(path.join(dir, 'sub'));
    writePrediction(path.join(dir, 'sub', 'p.json'), base);
    const c = readConfig(config('sub/p.json'));
    expect(c.prediction).toEqual({ file: path.join(dir, 'sub', 'p.json'), initial: base });
    expect(readConfig(config(null)).prediction).toBeNull();
  });

  it.each([
    [3, /c\.json: field "prediction" must be null or the path of a prediction file/],
    ['nope.json', /c\.json: field "prediction" .*nope\.json is not a file/],
    ['bad.json', /c\.json: field "prediction": .*bad\.json: cannot read it as JSON/],
    ['wrong.json', /c\.json: field "prediction": .*wrong\.json: field "arrivedPerFrame\[0\]" must be a count >= 0, got null/],
  ])('refuses %j naming the config file, the field and the prediction file', (value, msg) => {
    fs.writeFileSync(path.join(dir, 'bad.json'), '{"policy":');
    fs.writeFileSync(path.join(dir, 'wrong.json'), JSON.stringify({ ...base, arrivedPerFrame: [null, 1, 2] }));
    expect(() => readConfig(config(value))).toThrow(msg);
  });

  (fs.existsSync(KAIS) ? it : it.skip)('kais orchestrator with a bad prediction exits 2 with one line', () => {
    fs.writeFileSync(path.join(dir, 'wrong.json'), JSON.stringify({ ...base, frameS: 'slow' }));
    const r = spawnSync(process.execPath, [KAIS, 'orchestrator', '--config', config('wrong.json')], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/c\.json: field "prediction": .*wrong\.json: field "frameS" must be seconds in \(0, 86400\], got "slow"$/);
  });
});
