/**
 * shared/nets/actor-file.ts and actor-fit.ts: what the orchestrator deploys from a `kais train`
 * database is what `kais eval --checkpoint` evaluates (the best held-out checkpoint, meta `best`;
 * the newest when there is none), and the one check whether weights fit a scenario's actor.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { actorShapes, ACTOR_HIDDEN } from '../../../../shared/nets/actor-f32';
import {
  checkpointActor,
  checkpointHead,
  defaultModelPath,
  deployableActor,
  modelAct,
  readActorFile,
} from '../../../../shared/nets/actor-file';
import { actorFit, actorHolds, scenarioActor } from '../../../../shared/nets/actor-fit';
import { CheckpointDb, type CheckpointRow } from '../../../../shared/nets/checkpoint-db';
import { loadScenario } from '../../../../shared/scenario';

function row(episode: number, frame: number, value: number): CheckpointRow {
  const t = [new Float32Array([value, value]), new Float32Array([value, 0])];
  const shapes = [[1, 2], [2]];
  return {
    episode,
    frame,
    actor: t,
    actorShapes: shapes,
    critic: t,
    criticShapes: shapes,
    adam: t,
    adamShapes: shapes,
    state: { weightVersion: episode, actorAdamStep: 0, criticAdamStep: 0, rng: {} },
  };
}

describe('checkpointActor', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-ck-actor-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('takes the best checkpoint when the run recorded one, else the newest, with the head of the config', () => {
    const file = path.join(dir, 'run.db');
    const db = CheckpointDb.open(file, 'create');
    db.writeConfig({ head: 'softplus1' });
    db.writeCheckpoint(row(1, 3, 0.5), []);
    db.writeCheckpoint(row(2, 6, 0.25), []);
    db.close();
    expect(checkpointActor(file).tensors[1].data[0]).toBe(0.25); // no best: the newest
    expect(checkpointActor(file).head).toBe('softplus1');

    const again = CheckpointDb.open(file, 'create');
    again.writeCheckpoint(row(3, 9, 0.125), [], { best: { frame: 3, rate: 0.8 } });
    again.close();
    const a = checkpointActor(file);
    expect(a.tensors[1].data[0]).toBe(0.5); // best at frame 3, not the newest (frame 9)
    expect(a.tensors.map((t) => t.shape)).toEqual([[1, 2], [2]]);
  });
});

describe('actorFit', () => {
  const needs = { obsDim: 10, numActions: 3, scorerInputs: 4 };
  const mlp = actorShapes(10, 3, [8, 5]);
  const scorer = [[4, 16], [16], [16, 1], [1]];

  it('takes any MLP chain from the inputs to the actions, with or without the target scorer', () => {
    expect(actorFit(mlp, needs)).toEqual({ hidden: [8, 5], targetScorer: false });
    expect(actorFit([...mlp, ...scorer], needs)).toEqual({ hidden: [8, 5], targetScorer: true });
    expect(actorFit(actorShapes(10, 3, []), needs)).toEqual({ hidden: [], targetScorer: false });
  });

  it('refuses other inputs, other actions, a broken chain, extra arrays and a scorer of other features', () => {
    expect(actorFit(actorShapes(11, 3, [8, 5]), needs)).toBeNull();
    expect(actorFit(actorShapes(10, 4, [8, 5]), needs)).toBeNull();
    expect(actorFit([[10, 8], [8], [7, 3], [3]], needs)).toBeNull();
    expect(actorFit([[10, 8], [7]], needs)).toBeNull();
    expect(actorFit([...mlp, [3]], needs)).toBeNull();
    expect(actorFit([...mlp, [5, 16], [16], [16, 1], [1]], needs)).toBeNull();
    expect(actorFit([], needs)).toBeNull();
  });

  it('with fixed hidden widths, refuses any others, even when a hidden width equals the actions', () => {
    expect(actorFit(mlp, { ...needs, hidden: [8, 5] })).toEqual({ hidden: [8, 5], targetScorer: false });
    expect(actorFit(mlp, { ...needs, hidden: [8, 6] })).toBeNull();
    expect(actorFit(actorShapes(10, 3, [3, 5]), { ...needs, hidden: [3, 5] })).toEqual({ hidden: [3, 5], targetScorer: false });
  });

  it('says what misfit weights hold', () => {
    expect(actorHolds(actorShapes(11, 4, [8, 5]))).toBe('an actor with 11 inputs and 4 actions');
    expect(actorHolds([])).toBe('an actor with ? inputs and ? actions');
  });

  it('defaults to kais-cmmac.bin under every orchestration; the actor fine-tuned on GPG ships beside it, sampling', () => {
    const kais = loadScenario('kais');
    // gpg included: kais-cmmac-gpg.bin is an opt-in since session 25 (session 28's leads by validation and on held-out P4, loses on a held-out trace window)
    for (const o of [undefined, 'gpg', 'hpa', 'static', 'gsp-ss']) expect(path.basename(defaultModelPath(kais, o)!)).toBe('kais-cmmac.bin');
    expect(defaultModelPath(loadScenario('tiny'), 'gpg')).toBeNull();
    // both fit kais, and the gpg one is deployed sampling (kais train --eval-act sample exported it)
    const gpgActor = path.join(path.dirname(defaultModelPath(kais)!), 'kais-cmmac-gpg.bin');
    expect(deployableActor(gpgActor, kais).tensors.length).toBe(readActorFile(defaultModelPath(kais)!).tensors.length);
    expect(modelAct(gpgActor)).toBe('sample');
    expect(modelAct(defaultModelPath(kais)!)).toBe('argmax');
  });

  it('takes the shipped kais model for kais and refuses it for tiny, naming both', () => {
    const kais = loadScenario('kais');
    const file = defaultModelPath(kais)!;
    const a = readActorFile(file);
    expect(actorFit(a.shapes, { ...scenarioActor(kais), hidden: ACTOR_HIDDEN })).not.toBeNull();
    expect(deployableActor(file, kais).tensors.length).toBe(a.tensors.length);
    expect(() => deployableActor(file, loadScenario('tiny'))).toThrow(
      /holds an actor with \d+ inputs and 41 actions; scenario tiny needs \d+ inputs and 4 actions/,
    );
  });
});

describe('the head of an actor file', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-head-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const shipped = path.resolve(__dirname, '../../../../models/kais-cmmac.bin');
  const meta = JSON.parse(fs.readFileSync(`${shipped}.json`, 'utf8')) as Record<string, unknown>;

  /** The shipped actor's weights with a sidecar whose head is `head` (left out when undefined). */
  function exported(name: string, head: unknown): string {
    const file = path.join(dir, `${name}.bin`);
    fs.copyFileSync(shipped, file);
    const m: Record<string, unknown> = { ...meta, head };
    if (head === undefined) delete m.head;
    fs.writeFileSync(`${file}.json`, JSON.stringify(m));
    return file;
  }

  function database(name: string, head: unknown): string {
    const file = path.join(dir, `${name}.db`);
    const db = CheckpointDb.open(file, 'create');
    db.writeConfig(head === undefined ? {} : { head });
    db.writeCheckpoint(row(1, 3, 0.5), []);
    db.close();
    return file;
  }

  it('reads the two heads there are, from every shipped actor and from exported files', () => {
    const models = path.resolve(__dirname, '../../../../models');
    for (const name of fs.readdirSync(models).filter((n) => n.endsWith('.bin'))) {
      expect(['relu1', 'softplus1']).toContain(readActorFile(path.join(models, name)).head);
    }
    for (const head of ['relu1', 'softplus1']) {
      const file = exported(`ok-${head}`, head);
      expect(readActorFile(file).head).toBe(head);
      expect(checkpointHead(file)).toBe(head);
      expect(checkpointActor(file).head).toBe(head);
    }
  });

  it.each([
    ['"bogus"', 'bogus', 'got "bogus"'],
    ['"softplus" (not softplus1)', 'softplus', 'got "softplus"'],
    ['a number', 1, 'got 1'],
    ['null', null, 'got null'],
    ['nothing (exported actors always carried one)', undefined, 'missing'],
  ])("refuses an exported actor whose head is %s, naming the file's .json and the field", (_name, head, got) => {
    const file = exported('bad', head);
    const message = `${file}.json: head must be relu1 or softplus1 (the actor's output head), ${got}`;
    expect(() => readActorFile(file)).toThrow(message);
    expect(() => checkpointHead(file)).toThrow(message);
    expect(() => checkpointActor(file)).toThrow(message);
  });

  it('takes a kais train database without a head as relu1 (written before the option), and refuses an unknown one', () => {
    const old = database('old', undefined);
    expect(checkpointHead(old)).toBe('relu1');
    expect(checkpointActor(old).head).toBe('relu1');
    const bad = database('bogus', 'bogus');
    const message = `${bad}: config head must be relu1 or softplus1 (the actor's output head), got "bogus"`;
    expect(() => checkpointHead(bad)).toThrow(message);
    expect(() => checkpointActor(bad)).toThrow(message);
  });
});
