/**
 * `kais train` on the `tiny` scenario for two frames, through the real CLI (dist/kais.js, built by
 * `npm test` before jest runs): checkpoint file, resume equal to an uninterrupted run, and one-line
 * exit 2 for corrupt, truncated or foreign checkpoints.
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import Database from 'better-sqlite3';
import { loadScenario } from '../../shared/scenario';
import * as tf from '@tensorflow/tfjs';
import { loadActorFile, loadCmmacFromDb, loadDefaultCmmac } from '../../training/jobs/checkpoint';
import { readActorFile } from '../../shared/nets/actor-file';
import { actorLayersFiles } from '../../shared/nets/actor-layers';
import { ActorF32 } from '../../shared/nets/actor';
import { expectUsageExit, killKaisWhen, runKais } from '../support/cli';
import { reproducibleMetrics } from '../support/train-db';

const ROOT = path.join(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-train-'));

const kais = (...args: string[]) => runKais(args);

function metricsOf(file: string): unknown[] {
  const db = new Database(file, { readonly: true });
  const metrics = reproducibleMetrics(db);
  db.close();
  return metrics;
}

const base = ['train', '--scenario', 'tiny', '--episode-frames', '1', '--bc-frames', '1', '--seed', '3', '--json'];

describe('kais train (smoke, tiny scenario)', () => {
  afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

  it('trains two frames and writes config, weights and per-frame metrics to SQLite', () => {
    const out = path.join(tmp, 'a.db');
    const r = kais(
      ...base,
      '--frames',
      '2',
      '--out',
      out,
      '--export-actor',
      path.join(tmp, 'a.bin'),
      '--export-layers',
      path.join(tmp, 'a-tfjs'),
    );
    expect(r.stderr).toMatch(/frame 2\/2 \[rl\]/);
    expect(r.code).toBe(0);
    const summary = JSON.parse(r.stdout);
    expect(summary.frames).toBe(2);
    expect(metricsOf(out)).toHaveLength(2);
    const policy = loadCmmacFromDb(out, loadScenario('tiny'));
    expect(policy.name).toBe('cmmac');
    expect(policy.version).toBe(2);
    // the exported actor (what models/ ships) loads as a policy of the same scenario only
    const exported = loadActorFile(path.join(tmp, 'a.bin'), loadScenario('tiny'));
    expect(exported.name).toBe('cmmac');
    expect(() => loadActorFile(path.join(tmp, 'a.bin'), loadScenario('small'))).toThrow(/trained on scenario "tiny"/);
    expect(loadDefaultCmmac(loadScenario('tiny'))).toBeNull();
    // the model shipped for kais (models/kais-cmmac.bin, docs/cmmac.md) fits the current scenario
    expect(loadDefaultCmmac(loadScenario('kais'))?.name).toBe('cmmac');
  });

  it('--export-layers writes the same actor as --export-actor as a TensorFlow.js layers model', async () => {
    const dir = path.join(tmp, 'a-tfjs');
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);
    const file = readActorFile(path.join(tmp, 'a.bin'));
    const meta = JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8')).userDefinedMetadata;
    expect(meta.scenario).toBe('tiny');
    const dim = meta.obsDim as number;
    const A = meta.numActions as number;
    const x = new Float32Array(8 * dim).map((_, i) => Math.abs(Math.sin(i * 0.7)));
    const own = new ActorF32(dim, A, file.tensors, undefined, file.head, meta.targetBlock).scores(x, 8);
    const model = await tf.loadLayersModel(actorLayersFiles(dir));
    const q = tf.tidy(() => (model.predict(tf.tensor2d(x, [8, dim])) as tf.Tensor).dataSync() as Float32Array);
    model.dispose();
    for (let i = 0; i < q.length; i++) expect(Math.abs(q[i] - own[i])).toBeLessThanOrEqual(1e-5 * own[i]);
  });

  it('--eval-act sample: evaluations sample, training is unchanged, and the export says act sample, which kais eval, kais export and the loaders follow', () => {
    const run = (name: string, extra: string[]) => {
      const out = path.join(tmp, `${name}.db`);
      const r = kais(
        ...base,
        '--frames',
        '3',
        '--eval-every',
        '1',
        '--out',
        out,
        '--export-actor',
        path.join(tmp, `${name}.bin`),
        ...extra,
      );
      expect(r.code).toBe(0);
      return out;
    };
    const argmaxDb = run('ev-argmax', []);
    const sampleDb = run('ev-sample', ['--eval-act', 'sample']);
    const split = (file: string) => {
      const rows = metricsOf(file) as Record<string, unknown>[];
      const evals = rows.map((m) => m['charts/evalThroughputRate']);
      const rest = rows.map((m) => Object.fromEntries(Object.entries(m).filter(([k]) => k !== 'charts/evalThroughputRate')));
      return { evals, rest };
    };
    const a = split(argmaxDb);
    const b = split(sampleDb);
    expect(b.rest).toEqual(a.rest); // evaluating by sampling draws from its own stream: training is untouched
    expect(b.evals).toHaveLength(3);
    expect(b.evals.every((e) => typeof e === 'number')).toBe(true);
    expect(b.evals).not.toEqual(a.evals); // and the evaluations did sample
    expect(metricsOf(run('ev-sample-2', ['--eval-act', 'sample']))).toEqual(metricsOf(sampleDb)); // same seed, same draws
    const tiny = loadScenario('tiny');
    expect(JSON.parse(fs.readFileSync(path.join(tmp, 'ev-sample.bin.json'), 'utf8')).act).toBe('sample');
    expect(JSON.parse(fs.readFileSync(path.join(tmp, 'ev-argmax.bin.json'), 'utf8')).act).toBeUndefined();
    expect(loadActorFile(path.join(tmp, 'ev-sample.bin'), tiny).mode).toBe('sample');
    expect(loadActorFile(path.join(tmp, 'ev-sample.bin'), tiny, { mode: 'argmax' }).mode).toBe('argmax');
    expect(loadActorFile(path.join(tmp, 'ev-argmax.bin'), tiny).mode).toBe('argmax');
    expect(loadCmmacFromDb(sampleDb, tiny).mode).toBe('sample');
    expect(loadCmmacFromDb(argmaxDb, tiny).mode).toBe('argmax');
    // kais eval acts as the model says unless --cmmac-act is given
    const evalOf = (db: string, extra: string[] = []) => {
      const r = kais('eval', '--scenario', 'tiny', '--frames', '2', '--policies', 'cmmac/static', '--checkpoint', db, '--json', ...extra);
      expect(r.code).toBe(0);
      return JSON.parse(r.stdout) as { cmmacAct?: string; results: unknown[] };
    };
    const byModel = evalOf(sampleDb);
    expect(byModel.cmmacAct).toBe('sample');
    expect(evalOf(sampleDb, ['--cmmac-act', 'sample'])).toEqual(byModel);
    const overridden = evalOf(sampleDb, ['--cmmac-act', 'argmax']);
    expect(overridden.cmmacAct).toBeUndefined();
    expect(overridden.results).not.toEqual(byModel.results);
    expect(evalOf(argmaxDb).cmmacAct).toBeUndefined();
    // kais export carries it into the layers model; an unknown act is one line naming the file
    const layers = path.join(tmp, 'ev-sample-tfjs');
    expect(kais('export', '--checkpoint', path.join(tmp, 'ev-sample.bin'), '--layers', layers).code).toBe(0);
    expect(JSON.parse(fs.readFileSync(path.join(layers, 'model.json'), 'utf8')).userDefinedMetadata.act).toBe('sample');
    const bad = path.join(tmp, 'ev-bad.bin');
    fs.copyFileSync(path.join(tmp, 'ev-sample.bin'), bad);
    fs.writeFileSync(
      `${bad}.json`,
      JSON.stringify({ ...JSON.parse(fs.readFileSync(path.join(tmp, 'ev-sample.bin.json'), 'utf8')), act: 'softmax' }),
    );
    expect(() => loadActorFile(bad, tiny)).toThrow(
      /ev-bad\.bin: not a usable kais checkpoint \(act must be argmax or sample, got "softmax"\)/,
    );
    expectUsageExit(
      kais('export', '--checkpoint', bad, '--layers', path.join(tmp, 'ev-bad-tfjs')),
      /ev-bad\.bin.*act must be argmax or sample/,
    );
    expectUsageExit(kais(...base, '--frames', '1', '--out', path.join(tmp, 'ev-x.db'), '--eval-act', 'greedy'), /--eval-act/);
  });

  it('resumes a stopped run and ends at the same numbers as an uninterrupted one', () => {
    const whole = path.join(tmp, 'whole.db');
    const parts = path.join(tmp, 'parts.db');
    expect(kais(...base, '--frames', '3', '--out', whole).code).toBe(0);
    expect(kais(...base, '--frames', '2', '--out', parts).code).toBe(0);
    const r = kais(...base, '--frames', '3', '--out', parts, '--resume');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/resuming/);
    expect(metricsOf(parts)).toEqual(metricsOf(whole));
    const a = loadCmmacFromDb(whole, loadScenario('tiny'));
    const b = loadCmmacFromDb(parts, loadScenario('tiny'));
    expect(b.version).toBe(a.version);
    // an earlier checkpoint of the same run
    expect(loadCmmacFromDb(whole, loadScenario('tiny'), { maxFrame: 1 }).version).toBe(1);
  });

  it('resumes a run killed with SIGKILL mid-episode and ends at the same numbers as an uninterrupted one', async () => {
    const args = ['train', '--scenario', 'tiny', '--episode-frames', '2', '--bc-frames', '1', '--seed', '4', '--frames', '6'];
    const whole = path.join(tmp, 'kill-whole.db');
    const killed = path.join(tmp, 'kill-parts.db');
    expect(kais(...args, '--out', whole).code).toBe(0);
    await killKaisWhen([...args, '--out', killed], /frame 4\/6/); // inside the second episode
    expect(metricsOf(killed).length).toBeLessThan(6); // it really died before the end
    const r = kais(...args, '--out', killed, '--resume');
    expect(r.code).toBe(0);
    expect(metricsOf(killed)).toEqual(metricsOf(whole));
  });

  it('stops at Ctrl-C (SIGINT) with exit 130, says how to continue, and the resumed run ends at the same numbers', async () => {
    const args = ['train', '--scenario', 'tiny', '--episode-frames', '2', '--bc-frames', '1', '--seed', '4', '--frames', '6'];
    const whole = path.join(tmp, 'kill-whole.db'); // written by the SIGKILL test above
    const stopped = path.join(tmp, 'int-parts.db');
    const { code, err } = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const child = spawn(process.execPath, [KAIS, ...args, '--out', stopped]);
      let err = '';
      child.stderr.on('data', (d: Buffer) => {
        err += d.toString();
        if (/frame 3\/6/.test(err) && !child.killed) child.kill('SIGINT'); // inside the second episode
      });
      child.on('exit', (c) => resolve({ code: c, err }));
    });
    expect(code).toBe(130);
    const held = /interrupted; .*int-parts\.db holds (\d) of 6 frames .*Continue with: kais train --resume --out .*int-parts\.db/.exec(err);
    expect(held).not.toBeNull();
    expect(metricsOf(stopped)).toHaveLength(Number(held![1])); // the frames after the last checkpoint are not kept
    expect(Number(held![1])).toBeLessThan(6);
    // exactly the line it printed: the run's own scenario (tiny), not the default (kais)
    const r = kais('train', '--resume', '--out', stopped);
    expect(r.code).toBe(0);
    expect(metricsOf(stopped)).toEqual(metricsOf(whole));
  });

  it('--resume says which flags it ignores (the run keeps its stored settings), and writes an --export-actor named now', () => {
    const out = path.join(tmp, 'ign.db');
    expect(kais(...base, '--frames', '1', '--out', out).code).toBe(0);
    const actor = path.join(tmp, 'ign.bin');
    const r = kais('train', '--out', out, '--resume', '--frames', '2', '--seed', '7', '--lr', '0.5', '--export-actor', actor);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^ignored on --resume \(the run keeps its stored settings\): --seed, --lr$/m);
    expect([fs.existsSync(actor), fs.existsSync(`${actor}.json`)]).toEqual([true, true]);
  });

  it("refuses an --export-actor that is the run's own --out or another run's database, before training", () => {
    const other = path.join(tmp, 'a.db');
    const before = fs.readFileSync(other);
    const self = path.join(tmp, 'self.db');
    expectUsageExit(
      kais(...base, '--frames', '1', '--out', self, '--export-actor', self),
      /--export-actor \S+self\.db: it is the --out file too/,
    );
    expect(fs.existsSync(self)).toBe(false);
    expectUsageExit(
      kais(...base, '--frames', '1', '--out', path.join(tmp, 'clash.db'), '--export-actor', other),
      /--export-actor \S+a\.db: is a SQLite database \(a kais train run\?\)/,
    );
    expect(fs.readFileSync(other).equals(before)).toBe(true);
    const dirJson = path.join(tmp, 'z.bin.json');
    fs.mkdirSync(dirJson);
    expectUsageExit(
      kais(...base, '--frames', '1', '--out', path.join(tmp, 'z.db'), '--export-actor', path.join(tmp, 'z.bin')),
      /z\.bin\.json is in the way/,
    );
    fs.rmdirSync(dirJson);
  });

  it('exits 2 with one line for a checkpoint whose state holds no random-number state', () => {
    const out = path.join(tmp, 'norng.db');
    fs.copyFileSync(path.join(tmp, 'a.db'), out);
    const db = new Database(out);
    db.prepare(`UPDATE checkpoints SET state = '{"x":1}'`).run();
    db.close();
    expectUsageExit(kais(...base, '--frames', '3', '--out', out, '--resume'), /holds no random-number state/);
  });

  it('refuses to overwrite an existing file without --resume', () => {
    const out = path.join(tmp, 'a.db');
    const r = kais(...base, '--frames', '1', '--out', out);
    expect(r.code).toBe(2);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(/file exists; pass --resume/);
  });

  it('exits 2 with one line for a file that is not a checkpoint', () => {
    const out = path.join(tmp, 'garbage.db');
    fs.writeFileSync(out, 'this is not sqlite at all, just some text '.repeat(200));
    const r = kais(...base, '--frames', '1', '--out', out, '--resume');
    expectUsageExit(r, /not a usable kais checkpoint/);
  });

  it('exits 2 with one line for a truncated checkpoint', () => {
    const out = path.join(tmp, 'trunc.db');
    fs.copyFileSync(path.join(tmp, 'a.db'), out);
    const bytes = fs.readFileSync(out);
    fs.writeFileSync(out, bytes.subarray(0, Math.floor(bytes.length / 2)));
    const r = kais(...base, '--frames', '3', '--out', out, '--resume');
    expectUsageExit(r, /kais checkpoint/);
  });

  it('exits 2 with one line when the stored weights fail their checksum', () => {
    const out = path.join(tmp, 'flip.db');
    fs.copyFileSync(path.join(tmp, 'a.db'), out);
    const db = new Database(out);
    const row = db.prepare('SELECT episode, actor FROM checkpoints ORDER BY episode DESC LIMIT 1').get() as {
      episode: number;
      actor: Buffer;
    };
    row.actor[row.actor.length - 40] ^= 0xff;
    db.prepare('UPDATE checkpoints SET actor = ? WHERE episode = ?').run(row.actor, row.episode);
    db.close();
    const r = kais(...base, '--frames', '3', '--out', out, '--resume');
    expectUsageExit(r, /checksum/);
    expect(() => loadCmmacFromDb(out, loadScenario('tiny'))).toThrow(/checksum/);
  });

  it('exits 2 with one line for a checkpoint of another scenario', () => {
    const r = kais('train', '--scenario', 'small', '--frames', '1', '--out', path.join(tmp, 'a.db'), '--resume');
    expectUsageExit(r, /trained on scenario "tiny", not "small"/);
    expect(() => loadCmmacFromDb(path.join(tmp, 'a.db'), loadScenario('small'))).toThrow(/not "small"/);
  });
});

describe('kais train --init-from', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-init-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('starts a new run from the weights of another run of the same scenario', () => {
    const first = path.join(dir, 'first.db');
    const second = path.join(dir, 'second.db');
    expect(kais(...base, '--frames', '1', '--out', first).code).toBe(0);
    const r = kais(
      'train',
      '--scenario',
      'tiny',
      '--episode-frames',
      '1',
      '--bc-frames',
      '0',
      '--frames',
      '1',
      '--out',
      second,
      '--init-from',
      first,
    );
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/starting from/);
    expect(metricsOf(second)).toHaveLength(1);
  });
});
