import * as fs from 'fs';
import * as path from 'path';
import {
  BUILT_IN_CURRICULUM,
  decidePromotion,
  loadCurriculum,
  loadValidation,
  validateLesson,
  type Lesson,
} from '../../../../training/curriculum/schedule';
import { MAX_EPISODE_FRAMES, MAX_LOAD, parseWindowFlag } from '../../../../training/jobs/train-options';
import { tmpDir } from '../../../support/tmp';

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
  it('loads the shipped lessons in order, each starting from the previous checkpoint: cloning, then RL on P4', () => {
    const ls = loadCurriculum('default');
    expect(ls.map((l) => [l.workload, l.teacher ?? 'rl'])).toEqual([
      ['p4', 'lec'],
      ['p4', 'rl'],
    ]);
    for (let i = 1; i < ls.length; i++) expect(ls[i].checkpointIn).toBe(ls[i - 1].checkpointOut);
  });
  it("loads cloud-drawn: the shipped lessons, with the cloud of the RL lesson drawn from 8 to 15 VMs per episode (session 34's actor E; docs/gpg.md, session 40)", () => {
    const shipped = loadCurriculum('default');
    const drawn = loadCurriculum(path.join(BUILT_IN_CURRICULUM, '..', 'cloud-drawn'));
    const bare = ({ description: _d, cloudVms: _c, source: _s, ...rest }: (typeof drawn)[number]) => rest;
    expect(drawn.map(bare)).toEqual(shipped.map(bare));
    expect(drawn.map((l) => l.cloudVms ?? null)).toEqual([null, [8, 15]]);
  });
  it("loads the handbook's staged lessons (P1, P2 static; P3 hpa; P4 at 1.1x)", () => {
    const ls = loadCurriculum(path.join(BUILT_IN_CURRICULUM, '..', 'staged'));
    expect(ls.map((l) => l.workload)).toEqual(['p1', 'p2', 'p3', 'p4']);
    for (let i = 1; i < ls.length; i++) expect(ls[i].checkpointIn).toBe(ls[i - 1].checkpointOut);
  });
  it('loads gpg-placement: one RL lesson on the GPG placement with the queueing charge, started by --init-from', () => {
    const ls = loadCurriculum(path.join(BUILT_IN_CURRICULUM, '..', 'gpg-placement'));
    expect(ls).toHaveLength(1);
    expect(ls[0]).toMatchObject({ orchestration: 'gpg', externality: 1, episodeFrames: 3, maxEpisodes: 20 });
    expect(ls[0].checkpointIn).toBeUndefined();
    expect(ls[0].teacher).toBeUndefined();
  });
  const traceDir = path.join(BUILT_IN_CURRICULUM, '..', 'trace-finetune');
  const hasTrace = fs.existsSync(
    path.join(BUILT_IN_CURRICULUM, '..', '..', '..', '..', 'shared', 'data', 'alibaba', 'v2017_batch_task.csv'),
  );
  (hasTrace ? it : it.skip)(
    'loads the trace fine-tuning lessons: the shipped ones, then RL on the early trace window (skipped without ../shared/data/alibaba)',
    () => {
      const ls = loadCurriculum(traceDir);
      expect(ls.map((l) => l.name)).toEqual(['01-clone-deadline-load', '02-rl-p4', '03-rl-trace-early']);
      expect(ls[2].traceWindowS).toEqual([-1100, 25000]);
    },
  );
  (hasTrace ? it : it.skip)(
    'loads trace-validated and trace-clone with their validation window 25000-30000 s (skipped without ../shared/data/alibaba)',
    () => {
      const dir = (n: string) => path.join(BUILT_IN_CURRICULUM, '..', n);
      expect(loadCurriculum(dir('trace-validated')).map((l) => l.teacher ?? 'rl')).toEqual(['deadline-load-eta', 'rl', 'rl']);
      expect(loadCurriculum(dir('trace-clone')).map((l) => [l.teacher ?? 'rl', l.traceWindowS ?? null])).toEqual([
        ['deadline-load', null],
        ['deadline-load', [-1100, 25000]],
        ['rl', null],
        ['rl', [-1100, 25000]],
      ]);
      for (const n of ['trace-validated', 'trace-clone']) expect(loadValidation(dir(n))?.traceWindowS).toEqual([25000, 30000]);
      expect(loadValidation('default')).toBeNull();
    },
  );
  (hasTrace ? it.each : it.skip.each)([
    // RL on the GPG placement, P4 and the early trace window alternating
    ['gpg-placement-trace', ['01-p4', '02-tr', '03-p4', '04-tr']],
    // its trace-heavier continuation (the first lesson goes on from --init-from: the end of the one above)
    ['gpg-placement-trace-2', ['05-tr', '06-p4', '07-tr']],
  ])('loads %s: lessons %j of 5 episodes on the GPG placement (skipped without ../shared/data/alibaba)', (folder, names) => {
    const ls = loadCurriculum(path.join(BUILT_IN_CURRICULUM, '..', folder));
    expect(ls.map((l) => [l.name, l.traceWindowS ?? null])).toEqual(names.map((n) => [n, n.endsWith('-tr') ? [-1100, 25000] : null]));
    for (const l of ls) {
      expect(l).toMatchObject({ orchestration: 'gpg', externality: 1, episodeFrames: 3, maxEpisodes: 5, teacher: undefined });
      expect(l.checkpointIn).toBeUndefined(); // each lesson goes on from the one before; the first from --init-from
    }
  });
  it('names the file and the field of a bad lesson', () => {
    const dir = tmpDir('kais-cur-');
    const f = path.join(dir, '01.json');
    fs.writeFileSync(f, JSON.stringify({ ...lesson, load: -1 }));
    expect(() => loadCurriculum(dir)).toThrow(/01\.json: field "load" must be a number/);
    fs.writeFileSync(f, JSON.stringify({ ...lesson, checkpointIn: 'nowhere' }));
    expect(() => loadCurriculum(f)).toThrow(/checkpointIn.*nowhere/);
    expect(() => loadCurriculum(path.join(dir, 'missing'))).toThrow(/--curriculum: cannot read/);
  });
  it('rejects fields it does not know (a misspelt one would be ignored silently otherwise)', () => {
    expect(() => validateLesson({ ...lesson, maxEpisode: 3 }, 'x.json')).toThrow(/x\.json: field "maxEpisode" is not a lesson field/);
  });
  it('reads the optional fields: teacher, trace window, dequeue and learner settings', () => {
    const optional = {
      teacher: 'lec',
      trace: 't.csv',
      traceWindowS: [-5, 100],
      dequeue: 'edf',
      lr: 2e-4,
      entropyCoef: 0.01,
      teamShare: 0.2,
      externality: 1,
    };
    expect(validateLesson({ ...lesson, ...optional }, 'x.json')).toMatchObject(optional);
    expect(() => validateLesson({ ...lesson, dequeue: 'lifo' }, 'x.json')).toThrow(/field "dequeue" must be one of fifo, edf, discounted/);
    expect(() => validateLesson({ ...lesson, trace: 't.csv', traceWindowS: [3, 3] }, 'x.json')).toThrow(
      /field "traceWindowS" must be \[from, to\]/,
    );
    expect(() => validateLesson({ ...lesson, traceWindowS: [0, 3] }, 'x.json')).toThrow(/field "traceWindowS" needs a "trace"/);
    expect(() => validateLesson({ ...lesson, lr: 0 }, 'x.json')).toThrow(/field "lr" must be a number/);
    expect(() => validateLesson({ ...lesson, externality: -1 }, 'x.json')).toThrow(/field "externality" must be a number/);
  });
  it('finds a scenario file beside the lesson, as its trace (a path from the working directory still works when none is there)', () => {
    const dir = tmpDir('kais-cur-scen-');
    fs.mkdirSync(path.join(dir, 'sub'));
    fs.mkdirSync(path.join(dir, 'scenarios'));
    fs.writeFileSync(path.join(dir, 'scenarios', 'sc.json'), '{}');
    fs.writeFileSync(path.join(dir, 'sub', '01.json'), JSON.stringify({ ...lesson, scenario: '../scenarios/sc.json' }));
    expect(loadCurriculum(path.join(dir, 'sub'))[0].scenario).toBe(path.join(dir, 'scenarios', 'sc.json'));
    // built-in names stay names
    fs.writeFileSync(path.join(dir, 'sub', '01.json'), JSON.stringify({ ...lesson, scenario: 'tiny' }));
    expect(loadCurriculum(path.join(dir, 'sub'))[0].scenario).toBe('tiny');
    // nothing beside the lesson: the path as written (from the working directory, as lessons were read before);
    // the working directory is one where that path leads elsewhere than from the lesson's folder
    const cwd = path.join(dir, 'a', 'b');
    fs.mkdirSync(cwd, { recursive: true });
    const fromCwd = path.join('..', '..', 'scenarios', 'sc.json');
    fs.writeFileSync(path.join(dir, 'sub', '01.json'), JSON.stringify({ ...lesson, scenario: fromCwd }));
    const was = process.cwd();
    process.chdir(cwd);
    try {
      expect(fs.existsSync(path.resolve(dir, 'sub', fromCwd))).toBe(false);
      expect(loadCurriculum(path.join(dir, 'sub'))[0].scenario).toBe(fromCwd);
    } finally {
      process.chdir(was);
    }
  });
  it('refuses a misspelt promotion field and two lessons writing the same checkpoint label', () => {
    expect(() => validateLesson({ ...lesson, promotion: { ...lesson.promotion, treshold: 0.9 } }, 'x.json')).toThrow(
      /x\.json: field "promotion\.treshold" is not a promotion field/,
    );
    const dir = tmpDir('kais-cur-dup-');
    fs.writeFileSync(path.join(dir, '01.json'), JSON.stringify(lesson));
    fs.writeFileSync(path.join(dir, '02.json'), JSON.stringify({ ...lesson, checkpointIn: 't' }));
    expect(() => loadCurriculum(dir)).toThrow(/02\.json: field "checkpointOut" is "t", which .*01\.json writes already/);
  });
  it("caps load at --load's 100 and episodeFrames at --episode-frames' 50", () => {
    expect(validateLesson({ ...lesson, load: 100, episodeFrames: 50 }, 'x.json')).toMatchObject({ load: 100, episodeFrames: 50 });
    expect(() => validateLesson({ ...lesson, load: 101 }, 'x.json')).toThrow(/field "load" must be a number in \[0.000001, 100\], got 101/);
    expect(() => validateLesson({ ...lesson, episodeFrames: 51 }, 'x.json')).toThrow(
      /field "episodeFrames" must be an integer in \[1, 50\], got 51/,
    );
    expect(MAX_LOAD).toBe(100);
    expect(MAX_EPISODE_FRAMES).toBe(50);
  });
  it('reads cloudVms, a whole number of VMs or a [min, max] range of them, and names anything else', () => {
    expect(validateLesson(lesson, 'x.json').cloudVms).toBeUndefined();
    expect(validateLesson({ ...lesson, cloudVms: 8 }, 'x.json').cloudVms).toBe(8);
    expect(validateLesson({ ...lesson, cloudVms: [8, 15] }, 'x.json').cloudVms).toEqual([8, 15]);
    for (const bad of [0, 2.5, '8', [8, 8], [15, 8], [0, 4], [1, 2, 3]])
      expect(() => validateLesson({ ...lesson, cloudVms: bad }, 'x.json')).toThrow(
        `x.json: field "cloudVms" must be a whole number of VMs in [1, 1000000] or [min, max] of them with min < max, got ${JSON.stringify(bad)}`,
      );
  });
  it('resolves a relative trace path against the lesson file and checks that it exists', () => {
    const dir = tmpDir('kais-cur-');
    fs.writeFileSync(path.join(dir, 'rows.csv'), '1,2,j,t,1,Terminated,50,0.01\n');
    fs.writeFileSync(path.join(dir, '01.json'), JSON.stringify({ ...lesson, trace: 'rows.csv' }));
    expect(loadCurriculum(dir)[0]).toMatchObject({ trace: path.join(dir, 'rows.csv'), source: path.join(dir, '01.json') });
    fs.writeFileSync(path.join(dir, '01.json'), JSON.stringify({ ...lesson, trace: 'gone.csv' }));
    expect(() => loadCurriculum(dir)).toThrow(/01\.json: field "trace": .*gone\.csv does not exist/);
  });
});

describe('loadValidation (validation.json of a curriculum folder, --eval-trace)', () => {
  it('is null for a folder without one and for a single lesson file', () => {
    const dir = tmpDir('kais-val-');
    fs.writeFileSync(path.join(dir, '01.json'), JSON.stringify(lesson));
    expect(loadValidation(dir)).toBeNull();
    expect(loadValidation(path.join(dir, '01.json'))).toBeNull();
  });
  it('reads the trace (relative to the file) and the window, and is not taken for a lesson', () => {
    const dir = tmpDir('kais-val-');
    fs.writeFileSync(path.join(dir, '01.json'), JSON.stringify(lesson));
    fs.writeFileSync(path.join(dir, 'rows.csv'), '1,2,j,t,1,Terminated,50,0.01\n');
    fs.writeFileSync(
      path.join(dir, 'validation.json'),
      JSON.stringify({ description: 'd', trace: 'rows.csv', traceWindowS: [25000, 30000] }),
    );
    expect(loadValidation(dir)).toEqual({
      file: path.join(dir, 'validation.json'),
      trace: path.join(dir, 'rows.csv'),
      traceWindowS: [25000, 30000],
    });
    expect(loadCurriculum(dir).map((l) => l.name)).toEqual(['t']);
  });
  it('names the file and the field of a bad one', () => {
    const dir = tmpDir('kais-val-');
    fs.writeFileSync(path.join(dir, 'rows.csv'), '1,2,j,t,1,Terminated,50,0.01\n');
    const f = path.join(dir, 'validation.json');
    fs.writeFileSync(f, JSON.stringify({ trace: 'rows.csv', traceWindowS: [5, 1] }));
    expect(() => loadValidation(dir)).toThrow(/validation\.json: field "traceWindowS" must be \[from, to\]/);
    fs.writeFileSync(f, JSON.stringify({ trace: 'gone.csv', traceWindowS: [0, 1] }));
    expect(() => loadValidation(dir)).toThrow(/validation\.json: field "trace": .*gone\.csv does not exist/);
    fs.writeFileSync(f, JSON.stringify({ trace: 'rows.csv', traceWindow: [0, 1] }));
    expect(() => loadValidation(dir)).toThrow(/validation\.json: field "traceWindow" is not a validation field/);
    fs.writeFileSync(f, '{"trace": ');
    expect(() => loadValidation(dir)).toThrow(/validation\.json: not readable JSON/);
  });
});

describe('parseWindowFlag (--eval-trace-window)', () => {
  it('reads from,to and refuses anything else, naming the flag', () => {
    expect(parseWindowFlag(undefined)).toBeUndefined();
    expect(parseWindowFlag('25000,30000')).toEqual([25000, 30000]);
    expect(parseWindowFlag('-1100, 25000')).toEqual([-1100, 25000]);
    for (const bad of ['30000,25000', '5,5', '1', '1,2,3', 'a,b', ',3']) {
      expect(() => parseWindowFlag(bad)).toThrow(/^--eval-trace-window: expected from,to/);
    }
  });
});
