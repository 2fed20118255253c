import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { decidePromotion, loadCurriculum, type Lesson } from '../../../../training/curriculum/schedule';

const lesson: Lesson = {
  name: 't',
  scenario: 'tiny',
  workload: 'p1',
  load: 1,
  episodeFrames: 1,
  orchestration: 'static',
  maxEpisodes: 10,
  promotion: { threshold: 0.9, plateauEpisodes: 3, minImprovement: 0.01 },
  checkpointOut: 't',
};

describe('decidePromotion', () => {
  it('promotes when the last episode reaches the threshold', () => {
    expect(decidePromotion(lesson, [0.5, 0.91])).toMatchObject({ promote: true, reason: 'threshold' });
  });
  it('promotes on a plateau: the last episodes did not beat the earlier best by minImprovement', () => {
    expect(decidePromotion(lesson, [0.5, 0.7, 0.705, 0.7, 0.709])).toMatchObject({ promote: true, reason: 'plateau' });
  });
  it('keeps going while the rate still improves', () => {
    expect(decidePromotion(lesson, [0.5, 0.6, 0.65, 0.7, 0.75])).toMatchObject({ promote: false, reason: 'continue' });
  });
  it('stops at the episode budget', () => {
    const rising = Array.from({ length: 10 }, (_, i) => 0.1 + 0.05 * i);
    expect(decidePromotion(lesson, rising)).toMatchObject({ promote: true, reason: 'budget' });
  });
  it('has no side effects on the history', () => {
    const h = Object.freeze([0.5, 0.6]);
    expect(() => decidePromotion(lesson, h)).not.toThrow();
  });
});

describe('loadCurriculum', () => {
  it('loads the shipped lessons in order, each starting from the previous checkpoint', () => {
    const ls = loadCurriculum('default');
    expect(ls.map((l) => l.workload)).toEqual(['p1', 'p2', 'p3', 'p4']);
    for (let i = 1; i < ls.length; i++) expect(ls[i].checkpointIn).toBe(ls[i - 1].checkpointOut);
  });
  it('names the file and the field of a bad lesson', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-cur-'));
    const f = path.join(dir, '01.json');
    fs.writeFileSync(f, JSON.stringify({ ...lesson, load: -1 }));
    expect(() => loadCurriculum(dir)).toThrow(/01\.json: field "load" must be a number/);
    fs.writeFileSync(f, JSON.stringify({ ...lesson, checkpointIn: 'nowhere' }));
    expect(() => loadCurriculum(f)).toThrow(/checkpointIn.*nowhere/);
    expect(() => loadCurriculum(path.join(dir, 'missing'))).toThrow(/--curriculum: cannot read/);
  });
});
