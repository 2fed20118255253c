/**
 * A trained `cmmac` dispatcher (agent/actor-policy.ts) from a `kais train` checkpoint file
 * (`loadCmmacFromDb`, for `kais eval --checkpoint`), an exported actor (`loadActorFile`) or the
 * model the project ships (`loadDefaultCmmac`). The file formats, their reading for deployment and
 * the fit check live in shared/nets/ (checkpoint-db.ts, actor-file.ts, actor-fit.ts), where the
 * orchestrator and `kais up` read them too.
 */
import * as fs from 'fs';
import { weightsFromBytes } from '../../shared/protocol/weights';
import type { Scenario } from '../../shared/scenario';
import { CmmacDispatch, type ActMode } from '../../agent/actor-policy';
import { ACTOR_HIDDEN, type HeadActivation } from '../../shared/nets/actor-f32';
import { actorFit, scenarioActor } from '../../shared/nets/actor-fit';
import { actorHeadOf, defaultModelPath, isActorFile, modelAct, type ExportedActorMeta } from '../../shared/nets/actor-file';
import { CheckpointDb, checkpointError as bad, checkScenario, oneLine } from '../../shared/nets/checkpoint-db';

/** Config fields loadCmmacFromDb needs (a subset of the train config). */
interface StoredConfig {
  scenarioFingerprint: string;
  scenario: string;
  obsDim: number;
  numActions: number;
  head?: HeadActivation;
}

/**
 * A trained `cmmac` dispatcher from a `kais train` file, for `scenario` (must be the one it was
 * trained on). `mode`: 'argmax' or 'sample' (seeded per episode by reset()); default: the run's
 * `--eval-act` (what its best checkpoint was chosen by; argmax before it existed). `maxFrame`:
 * the newest checkpoint with at most that many frames trained; default: the checkpoint of the best
 * held-out evaluation when the run evaluated (`--eval-every`), else the newest. `which: 'latest'`
 * ignores the best evaluation.
 */
export function loadCmmacFromDb(
  path: string,
  scenario: Scenario,
  options: { mode?: ActMode; maxFrame?: number; which?: 'best' | 'latest' } = {},
): CmmacDispatch {
  const mode = options.mode ?? modelAct(path);
  const db = CheckpointDb.open(path, 'read');
  try {
    const cfg = db.config<StoredConfig>();
    if (!cfg) throw bad(path, 'no config row');
    checkScenario(path, cfg, scenario);
    const best = options.maxFrame === undefined && options.which !== 'latest' ? db.meta<{ frame: number }>('best') : null;
    const ck = db.latest(options.maxFrame ?? best?.frame);
    if (!ck)
      throw bad(
        path,
        options.maxFrame === undefined ? 'no checkpoint written yet' : `no checkpoint at or before frame ${options.maxFrame}`,
      );
    const needs = scenarioActor(scenario);
    const shape = needs.shape;
    if (!actorFit(ck.actorShapes, { ...needs, hidden: ACTOR_HIDDEN })) throw bad(path, `actor shapes do not fit scenario ${scenario.name}`);
    return new CmmacDispatch({
      shape,
      queueCapPerReplica: scenario.queueCapPerReplica,
      weights: ck.actor,
      version: ck.state.weightVersion,
      mode,
      head: actorHeadOf(path, cfg.head, 'database'),
    });
  } finally {
    db.close();
  }
}

/**
 * A `cmmac` dispatcher from an exported actor (`<file>` weights + `<file>.json`), checked against
 * the scenario. `mode` default: the file's `act` (argmax when absent). Throws UsageError (one line)
 * when it is unreadable or made for something else.
 */
export function loadActorFile(file: string, scenario: Scenario, options: { mode?: ActMode } = {}): CmmacDispatch {
  let meta: ExportedActorMeta;
  let arrays: Float32Array[];
  let shapes: number[][];
  try {
    meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as ExportedActorMeta;
    ({ tensors: arrays, shapes } = weightsFromBytes(fs.readFileSync(file)));
  } catch (e) {
    throw bad(file, oneLine(e));
  }
  checkScenario(file, meta, scenario);
  const mode = options.mode ?? modelAct(file);
  const needs = scenarioActor(scenario);
  const shape = needs.shape;
  if (!actorFit(shapes, { ...needs, hidden: ACTOR_HIDDEN })) throw bad(file, `actor shapes do not fit scenario ${scenario.name}`);
  return new CmmacDispatch({
    shape,
    queueCapPerReplica: scenario.queueCapPerReplica,
    weights: arrays,
    mode,
    head: actorHeadOf(file, meta.head, 'sidecar'),
  });
}

/**
 * A `cmmac` dispatcher from what `--checkpoint` names: an exported actor (`<file>` + `<file>.json`:
 * loadActorFile) or a `kais train` file (loadCmmacFromDb), as `kais up --checkpoint` and `kais
 * export --checkpoint` take either.
 */
export function loadCmmacCheckpoint(file: string, scenario: Scenario, options: { mode?: ActMode } = {}): CmmacDispatch {
  return isActorFile(file) ? loadActorFile(file, scenario, options) : loadCmmacFromDb(file, scenario, options);
}

/**
 * The model the project ships for a scenario (`models/<scenario>-cmmac.bin`, made by the command in
 * docs/cmmac.md; under an `orchestration` of actor-file.ts ORCHESTRATION_ACTORS, none today, `<scenario>-cmmac-<orchestration>.bin` when it ships), acting as its `act` says unless `mode` is given, or null when none ships. A shipped file that does not fit (the scenario changed
 * since it was trained, or it is corrupt) throws UsageError with one line.
 */
export function loadDefaultCmmac(scenario: Scenario, options: { mode?: ActMode; orchestration?: string } = {}): CmmacDispatch | null {
  const file = defaultModelPath(scenario, options.orchestration);
  return file === null ? null : loadActorFile(file, scenario, options);
}
