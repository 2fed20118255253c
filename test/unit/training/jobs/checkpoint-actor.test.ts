/**
 * What the orchestrator deploys from a `kais train` database is what `kais eval --checkpoint`
 * evaluates: the best held-out checkpoint (meta `best`), the newest when there is none.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { CheckpointDb, checkpointActor, type CheckpointRow } from '../../../../training/jobs/checkpoint';

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
