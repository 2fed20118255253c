/**
 * `kais train --policies cmmac/gpg` on the `tiny` scenario through the real CLI (dist/kais.js,
 * built by `npm test` before jest runs): lessons that say which part learns (cMMAC on a fixed
 * placement, GPG with cMMAC frozen, both), GPG's state in the checkpoints so that a run killed
 * mid-lesson resumes to the same numbers and the same exported model, and one-line exit 2 for bad
 * flags and lesson fields.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Database from 'better-sqlite3';
import { expectUsageExit, killKaisWhen, runKais } from '../support/cli';
import { reproducibleMetrics } from '../support/train-db';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-joint-'));

const kais = (...args: string[]) => runKais(args, 240000);

interface Stored {
  metrics: Record<string, unknown>[];
  meta: Record<string, unknown>;
  checkpoints: { episode: number; actor: Buffer; gpg: string | undefined }[];
}

function read(file: string): Stored {
  const db = new Database(file, { readonly: true });
  const metrics = reproducibleMetrics(db);
  const meta = Object.fromEntries(
    (db.prepare("SELECT key, value FROM meta WHERE key NOT IN ('format', 'config')").all() as { key: string; value: string }[]).map((r) => [
      r.key,
      JSON.parse(r.value),
    ]),
  );
  const cks = db.prepare('SELECT episode, actor, state FROM checkpoints ORDER BY episode').all() as {
    episode: number;
    actor: Buffer;
    state: string;
  }[];
  db.close();
  const checkpoints = cks.map((c) => ({
    episode: c.episode,
    actor: c.actor,
    gpg: (JSON.parse(c.state) as { gpg?: { weights: string } }).gpg?.weights,
  }));
  return { metrics, meta, checkpoints };
}

/** cMMAC clones lec on a fixed placement, then GPG learns with cMMAC frozen, then both learn. */
function writeLessons(dir: string): void {
  fs.mkdirSync(dir, { recursive: true });
  const common = { scenario: 'tiny', workload: 'p4', load: 1, promotion: { plateauEpisodes: 5, minImprovement: 0.01 } };
  const lessons = [
    { name: '01-clone', episodeFrames: 1, orchestration: 'static', maxEpisodes: 1, teacher: 'lec', checkpointOut: 'cloned' },
    {
      name: '02-gpg',
      episodeFrames: 2,
      orchestration: 'gpg',
      learn: ['gpg'],
      maxEpisodes: 1,
      checkpointIn: 'cloned',
      checkpointOut: 'gpg',
    },
    {
      name: '03-joint',
      episodeFrames: 2,
      orchestration: 'gpg',
      learn: ['cmmac', 'gpg'],
      maxEpisodes: 2,
      checkpointIn: 'gpg',
      checkpointOut: 'joint',
    },
  ];
  for (const l of lessons) fs.writeFileSync(path.join(dir, `${l.name}.json`), JSON.stringify({ ...common, ...l }));
}

const lessonsDir = path.join(tmp, 'lessons');
const args = [
  'train',
  '--scenario',
  'tiny',
  '--policies',
  'cmmac/gpg',
  '--curriculum',
  lessonsDir,
  '--seed',
  '5',
  '--eval-every',
  '2',
  '--gpg-rollouts',
  '2',
];

describe('kais train --policies cmmac/gpg (smoke, tiny scenario)', () => {
  beforeAll(() => writeLessons(lessonsDir));
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('trains through the lessons: cMMAC alone, GPG with cMMAC frozen, both; writes the GPG of the best cmmac/gpg evaluation', () => {
    const out = path.join(tmp, 'whole.db');
    const model = path.join(tmp, 'whole-gpg.json');
    const r = kais(...args, '--out', out, '--export-gpg', model);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(
      /lesson 2\/3 "02-gpg" starts at frame 1: p4 x1, 2-frame episodes, gpg, edf, RL, at most 1 episodes, learning gpg/,
    );
    expect(r.stderr).toMatch(/lesson 3\/3 "03-joint" starts at frame 3: .*learning cmmac and gpg, from checkpoint "gpg"/);
    expect(r.stderr).toMatch(/gpg update 3 on 2 rollouts: throughput rate [\d.]+/);
    expect(r.stderr).toMatch(/eval after 3 frames: cmmac\/gpg throughput rate/);
    const { metrics, meta, checkpoints } = read(out);
    expect(metrics.map((m) => [m.lesson, m.phase])).toEqual([
      ['01-clone', 'bc'],
      ['02-gpg', 'frozen'],
      ['02-gpg', 'frozen'],
      ['03-joint', 'rl'],
      ['03-joint', 'rl'],
      ['03-joint', 'rl'],
      ['03-joint', 'rl'],
    ]);
    // GPG's update figures at the end of each episode it learned in
    expect(metrics.filter((m) => m['gpg/meanReturn'] !== undefined).map((m) => m.frame)).toEqual([2, 4, 6]);
    // cMMAC frozen in lesson 2: the actor is the cloned one; GPG moved; both move in lesson 3
    const [c0, c1, c2] = checkpoints;
    expect(c1.actor.equals(c0.actor)).toBe(true);
    expect(c1.gpg).not.toEqual(c0.gpg);
    expect(c2.actor.equals(c1.actor)).toBe(false);
    expect(c2.gpg).not.toEqual(c1.gpg);
    // the best is chosen among cmmac/gpg evaluations only (frame 1's was on static)
    expect((meta.best as { frame: number }).frame).toBeGreaterThanOrEqual(3);
    // the exported model runs in kais eval
    const e = kais('eval', '--scenario', 'tiny', '--policies', 'lec/gpg', '--gpg', model, '--frames', '2', '--json');
    expect(e.code).toBe(0);
    expect(JSON.parse(e.stdout).results[0].policy).toBe('lec/gpg');
  });

  it('resumes a run killed with SIGKILL inside the joint lesson to the same numbers and the same GPG model', async () => {
    const killed = path.join(tmp, 'killed.db');
    const model = path.join(tmp, 'killed-gpg.json');
    await killKaisWhen([...args, '--out', killed, '--export-gpg', model], /frame 6\/7/); // inside the second episode of lesson 3
    expect(read(killed).metrics.length).toBeLessThan(7); // it really died before the end
    expect(fs.existsSync(model)).toBe(false);
    // no --policies or --curriculum: a resume trains what the run stored
    const r = kais('train', '--scenario', 'tiny', '--out', killed, '--resume');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/in lesson 3\/3 "03-joint" after 1 of its episodes/);
    const [a, b] = [read(killed), read(path.join(tmp, 'whole.db'))];
    expect(a.metrics).toEqual(b.metrics);
    expect(a.meta).toEqual(b.meta);
    expect(a.checkpoints.at(-1)!.gpg).toEqual(b.checkpoints.at(-1)!.gpg);
    expect(a.checkpoints.at(-1)!.actor.equals(b.checkpoints.at(-1)!.actor)).toBe(true);
    // the stored --export-gpg: the resumed run writes the uninterrupted run's model, byte for byte
    expect(fs.readFileSync(model, 'utf8')).toBe(fs.readFileSync(path.join(tmp, 'whole-gpg.json'), 'utf8'));
  });

  it('--gpg-init starts GPG from a model: its weights, its entropy schedule, action budget and scale-in continued; the export counts every update', () => {
    // the first test's export (the GPG of its best evaluation, after n updates) with its own budget H = 3 and
    // hpa's scale-in as the starting model; lesson 1 runs without GPG, lesson 2 trains it once
    const model = path.join(tmp, 'whole-gpg-h3.json');
    const scaleIn = { rule: 'hpa', targetUtilisation: 0.5, keepPerEap: true };
    fs.writeFileSync(
      model,
      JSON.stringify({ ...JSON.parse(fs.readFileSync(path.join(tmp, 'whole-gpg.json'), 'utf8')), nodesPerFrame: 3, scaleIn }),
    );
    const n = JSON.parse(fs.readFileSync(model, 'utf8')).trainedWith.updates as number;
    expect(n).toBeGreaterThanOrEqual(1);
    const dir = path.join(tmp, 'init-lessons');
    writeLessons(dir);
    fs.rmSync(path.join(dir, '03-joint.json'));
    const out = path.join(tmp, 'init.db');
    const again = path.join(tmp, 'init-gpg.json');
    const r = kais(...args.map((a) => (a === lessonsDir ? dir : a)), '--gpg-init', model, '--out', out, '--export-gpg', again);
    expect(r.code).toBe(0);
    // GPG's first update here is the model's (n + 1)-th (a fresh GPG's first reads "gpg update 1")
    expect(r.stderr).toContain(`gpg update ${n + 1} on 2 rollouts`);
    const [c0, c1] = read(out).checkpoints;
    expect(c0.gpg).toBe(JSON.parse(fs.readFileSync(model, 'utf8')).weights); // lesson 1 does not touch GPG
    expect(c1.gpg).not.toBe(c0.gpg);
    expect(JSON.parse(fs.readFileSync(again, 'utf8'))).toMatchObject({
      nodesPerFrame: 3,
      scaleIn,
      trainedWith: { updates: n + 1, gpgInit: model },
    });
  });

  describe('bad flags and lesson fields: exit 2 with one line, nothing written', () => {
    const cases: [string, string[], ((dir: string) => void) | null, RegExp][] = [
      ['an unknown --policies', ['--policies', 'cmmac/hpa'], null, /--policies/],
      ['--gpg-rollouts 0', ['--gpg-rollouts', '0'], null, /--gpg-rollouts/],
      ['a negative --gpg-replica-cost', ['--gpg-replica-cost', '-1'], null, /--gpg-replica-cost/],
      [
        'a GPG flag without --policies cmmac/gpg',
        ['--policies', 'cmmac', '--gpg-op-cost', '0.01'],
        null,
        /--gpg-op-cost: only with --policies cmmac\/gpg/,
      ],
      [
        '--gpg-init of a model for another scenario',
        ['--gpg-init', path.join(__dirname, '..', '..', 'models', 'kais-gpg.json')],
        null,
        /--gpg-init: .*kais-gpg\.json: made for 30 services, the scenario has \d+\n?$/,
      ],
      ['--gpg-init of a missing file', ['--gpg-init', '/nonexistent/gpg.json'], null, /--gpg-init/],
      [
        'a gpg lesson in a cmmac run',
        ['--policies', 'cmmac'],
        null,
        /02-gpg\.json: field "orchestration" needs GPG: pass --policies cmmac\/gpg/,
      ],
      [
        'learn naming an unknown part',
        [],
        (d) => edit(d, '03-joint.json', { learn: ['cmmac', 'hpa'] }),
        /03-joint\.json: field "learn" must be a non-empty list/,
      ],
      [
        'GPG learning on a fixed orchestration',
        [],
        (d) => edit(d, '03-joint.json', { orchestration: 'hpa' }),
        /03-joint\.json: field "learn" names gpg/,
      ],
      [
        'a frozen cMMAC cloning a teacher',
        [],
        (d) => edit(d, '02-gpg.json', { teacher: 'lec' }),
        /02-gpg\.json: field "learn" leaves cmmac frozen/,
      ],
    ];
    it.each(cases)('%s', (_what, flags, spoil, message) => {
      const dir = fs.mkdtempSync(path.join(tmp, 'bad-'));
      writeLessons(dir);
      spoil?.(dir);
      const out = path.join(dir, 'never.db');
      const base = ['train', '--scenario', 'tiny', '--policies', 'cmmac/gpg', '--curriculum', dir, '--out', out];
      const r = kais(...base, ...flags);
      expectUsageExit(r, message, out);
    });

    it('cmmac/gpg with no lessons (no --curriculum off kais)', () => {
      const r = kais('train', '--scenario', 'tiny', '--policies', 'cmmac/gpg', '--out', path.join(tmp, 'never.db'));
      expectUsageExit(r, /--policies cmmac\/gpg: trains through lessons/);
    });
  });
});

function edit(dir: string, file: string, patch: Record<string, unknown>): void {
  const f = path.join(dir, file);
  fs.writeFileSync(f, JSON.stringify({ ...(JSON.parse(fs.readFileSync(f, 'utf8')) as object), ...patch }));
}
