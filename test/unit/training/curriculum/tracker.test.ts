import { CurriculumTracker, withCloudVms } from '../../../../training/curriculum/tracker';
import { Rng } from '../../../../shared/rng';
import { loadScenario } from '../../../../shared/scenario';
import { validateLesson, type Lesson } from '../../../../training/curriculum/schedule';

const base = { scenario: 'tiny', workload: 'p4' as const, load: 1, episodeFrames: 2, orchestration: 'hpa' };
const first: Lesson = { ...base, name: 'a', maxEpisodes: 3, promotion: { plateauEpisodes: 10, minImprovement: 0 }, checkpointOut: 'a-out' };
const second = (from?: 'last' | 'best'): Lesson => ({
  ...base,
  name: 'b',
  maxEpisodes: 2,
  promotion: { plateauEpisodes: 10, minImprovement: 0 },
  checkpointIn: 'a-out',
  ...(from ? { checkpointFrom: from } : {}),
  checkpointOut: 'b-out',
});

/** Lesson a: three 2-frame episodes (0, 1, 2), evaluated after each with these scores. */
function runFirst(t: CurriculumTracker, scores: (number | null)[]): void {
  expect(t.start(0, 0, -1)).toBeNull();
  scores.forEach((s, episode) => {
    if (s !== null) t.evaluated(episode, 2 * (episode + 1), s);
    t.endEpisode(episode, 2 * (episode + 1), 0.5);
  });
}

describe('CurriculumTracker: where a lesson starts (checkpointFrom)', () => {
  it('labels the finished lesson with its end and its best evaluation; a later lesson starts from the one it names', () => {
    for (const [from, episode, frame] of [
      ['best', 1, 4],
      ['last', 2, 6],
      [undefined, 2, 6],
    ] as const) {
      const t = new CurriculumTracker([first, second(from)], { state: null, log: null, labels: null });
      runFirst(t, [0.61, 0.7, 0.65]);
      expect(t.labels['a-out']).toEqual({ episode: 2, frame: 6, best: { episode: 1, frame: 4 } });
      expect(t.lesson!.name).toBe('b');
      expect(t.origin()).toEqual({ episode, frame, which: from ?? 'last' });
      // restore only when that checkpoint is not where the run stands (the last one written is episode 2)
      expect(t.start(3, 6, 2)).toEqual(from === 'best' ? { episode: 1, frame: 4, which: 'best' } : null);
    }
  });

  it('keeps the earlier of equal scores and starts from the end when the lesson ran no evaluation', () => {
    const t = new CurriculumTracker([first, second('best')], { state: null, log: null, labels: null });
    runFirst(t, [0.7, 0.7, null]);
    expect(t.labels['a-out'].best).toEqual({ episode: 0, frame: 2 });
    const u = new CurriculumTracker([first, second('best')], { state: null, log: null, labels: null });
    runFirst(u, [null, null, null]);
    expect(u.labels['a-out']).toEqual({ episode: 2, frame: 6 });
    expect(u.origin()).toEqual({ episode: 2, frame: 6, which: 'last' });
  });

  it("carries the running lesson's best in its state, so a resumed run labels the same checkpoint", () => {
    const t = new CurriculumTracker([first, second('best')], { state: null, log: null, labels: null });
    t.start(0, 0, -1);
    t.evaluated(0, 2, 0.6);
    t.endEpisode(0, 2, 0.5);
    t.evaluated(1, 4, 0.8);
    t.endEpisode(1, 4, 0.5);
    // what a checkpoint stores, read back by a resume
    const r = new CurriculumTracker([first, second('best')], JSON.parse(JSON.stringify({ state: t.state, log: t.log, labels: t.labels })));
    r.evaluated(2, 6, 0.7);
    r.endEpisode(2, 6, 0.5);
    expect(r.labels['a-out']).toEqual({ episode: 2, frame: 6, best: { episode: 1, frame: 4 } });
    expect(r.state.best).toBeUndefined(); // lesson b starts with no best of its own
  });
});

describe('validateLesson: checkpointFrom', () => {
  const raw = { ...second(), promotion: { plateauEpisodes: 2, minImprovement: 0 } };
  it('reads last and best, and refuses anything else or a lesson without checkpointIn, naming the file and field', () => {
    expect(validateLesson({ ...raw, checkpointFrom: 'best' }, 'b.json').checkpointFrom).toBe('best');
    expect(validateLesson(raw, 'b.json').checkpointFrom).toBeUndefined();
    expect(() => validateLesson({ ...raw, checkpointFrom: 'first' }, 'b.json')).toThrow(
      'b.json: field "checkpointFrom" must be "last" or "best", got "first"',
    );
    const { checkpointIn: _, ...noIn } = raw;
    expect(() => validateLesson({ ...noIn, checkpointFrom: 'best' }, 'b.json')).toThrow(
      'b.json: field "checkpointFrom" needs a "checkpointIn" to start from',
    );
  });
});

describe("withCloudVms: the scenario of a training episode under a lesson's cloudVms", () => {
  const kais = loadScenario('kais');
  it("is the run's scenario without the field, and changes nothing but the cloud's VMs with it", () => {
    expect(withCloudVms(kais, null, new Rng(1))).toBe(kais);
    const s = withCloudVms(kais, 8, new Rng(1));
    expect(s.cloud).toEqual({ ...kais.cloud, vms: 8 });
    expect({ ...s, cloud: kais.cloud }).toEqual(kais);
    expect(kais.cloud.vms).toBe(15); // the run's scenario is not touched
  });
  it('draws a range per episode: every value of [min, max], none outside, the same for the same seed', () => {
    const draw = (seed: number) => withCloudVms(kais, [8, 11], Rng.derive(seed, 'train/cloud-0')).cloud.vms;
    const seen = Array.from({ length: 200 }, (_, i) => draw(i));
    expect(new Set(seen)).toEqual(new Set([8, 9, 10, 11]));
    expect(Array.from({ length: 200 }, (_, i) => draw(i))).toEqual(seen);
  });
});
