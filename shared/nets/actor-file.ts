/**
 * Loading a trained actor for deployment: an exported actor (`<file>` weights, shared/protocol/weights.ts
 * bytes, + `<file>.json`, `kais train --export-actor`) or a `kais train` checkpoint file
 * (checkpoint-db.ts), as the orchestrator publishes it, `kais up` starts from it and `kais eval`
 * evaluates it; and the models the project ships (`models/<scenario>-cmmac.bin`). Reads files and
 * shapes only (no tfjs); whether the weights fit a scenario's actor is actor-fit.ts's one check.
 */
import * as fs from 'fs';
import { join as pathJoin } from 'path';
import { weightsFromBytes } from '../protocol/weights';
import type { Scenario } from '../scenario';
import { UsageError } from '../errors';
import { ACTOR_HIDDEN, type HeadActivation } from './actor-f32';
import { actorFit, actorHolds, scenarioActor } from './actor-fit';
import { CheckpointDb, checkpointError, oneLine } from './checkpoint-db';

/** The `.json` written next to an exported actor (`kais train --export-actor`). */
export interface ExportedActorMeta {
  scenario: string;
  scenarioFingerprint: string;
  head: HeadActivation;
  obsDim: number;
  numActions: number;
  /**
   * How the actor is meant to act: `sample` (draw each target from the policy) when `kais train
   * --eval-act sample` chose it; absent: argmax. kais eval and kais up act as it says.
   */
  act?: ModelAct;
}

/** How a trained actor acts when deployed: its most likely target, or one drawn from its policy. */
export type ModelAct = 'argmax' | 'sample';

/**
 * How a checkpoint's actor is meant to act: an exported actor's `.json` field `act`, or a `kais
 * train` database's `--eval-act` (what its best checkpoint was chosen by); argmax when absent.
 * UsageError (one line) if unreadable or not a known value.
 */
export function modelAct(path: string): ModelAct {
  let act: unknown;
  if (isActorFile(path)) {
    try {
      act = (JSON.parse(fs.readFileSync(`${path}.json`, 'utf8')) as Partial<ExportedActorMeta>).act;
    } catch (e) {
      throw checkpointError(path, oneLine(e));
    }
  } else {
    const db = CheckpointDb.open(path, 'read');
    try {
      act = db.config<{ evalAct?: unknown }>()?.evalAct;
    } finally {
      db.close();
    }
  }
  if (act === undefined) return 'argmax';
  if (act === 'argmax' || act === 'sample') return act;
  throw checkpointError(path, `act must be argmax or sample, got ${JSON.stringify(act)}`);
}

/** Folders searched for shipped models: `models/` at the package root, from source or from dist/. */
export function modelDirs(): string[] {
  return [pathJoin(__dirname, '..', '..', 'models'), pathJoin(__dirname, '..', '..', '..', 'models')];
}

/**
 * Orchestrations under which the default actor is `<scenario>-cmmac-<orchestration>.bin` when it
 * ships, before `<scenario>-cmmac.bin`. Empty since session 25: session 24's actor fine-tuned on GPG's
 * placement was +0.6% on the P4 validation rule but -1.7% on the trace validation window (25,000-30,000
 * s). Its successors (sessions 27 and 28, P4 and trace lessons: training/curriculum/gpg-placement-trace
 * and -trace-2) lead by both validation rules, and session 28's makes 1.041x the best heuristic pair on
 * held-out P4 at the default load, but held out on the trace window 30,000-38,000 s it is 1.9% below
 * the argmax default (docs/cmmac.md "Trace-heavier"), so models/kais-cmmac-gpg.bin stays an opt-in
 * (`--checkpoint models/kais-cmmac-gpg.bin`). Add 'gpg' here to make it gpg's default.
 */
const ORCHESTRATION_ACTORS: readonly string[] = [];

/**
 * Path of the cMMAC model the project ships for a scenario, or null: `<scenario>-cmmac.bin`, or
 * under an orchestration of ORCHESTRATION_ACTORS the actor made for it when that ships.
 */
export function defaultModelPath(scenario: Scenario, orchestration?: string): string | null {
  const own = orchestration !== undefined && ORCHESTRATION_ACTORS.includes(orchestration);
  const names = [...(own ? [`${scenario.name}-cmmac-${orchestration}.bin`] : []), `${scenario.name}-cmmac.bin`];
  for (const name of names)
    for (const dir of modelDirs()) {
      const file = pathJoin(dir, name);
      if (fs.existsSync(file) && fs.existsSync(`${file}.json`)) return file;
    }
  return null;
}

/**
 * Path of the GPG model the project ships for a scenario (`models/<scenario>-gpg.json`, the one
 * `gpg` runs when no model is named: docs/gpg.md says how it was made), or null.
 */
export function defaultGpgModelPath(scenario: Scenario): string | null {
  for (const dir of modelDirs()) {
    const file = pathJoin(dir, `${scenario.name}-gpg.json`);
    if (fs.existsSync(file)) return file;
  }
  return null;
}

/** The actor heads there are (shared/nets/dense-f32.ts HeadActivation). */
export const HEAD_ACTIVATIONS: readonly HeadActivation[] = ['relu1', 'softplus1'];

/**
 * The `head` field of an actor's file, checked: an unknown value is refused, not run as relu1 (the
 * nets take anything but 'softplus1' for relu1, so "softplus" or a typo would run the wrong net).
 * Where it is missing differs by file:
 * - an exported actor's `<file>.json`: refused. Exported actors appeared after the head option
 *   (commits 1bf0b8c then 95888ce, 2026-11-29) and every one was written with its head, so a
 *   sidecar without one was not written by kais and its head is unknown.
 * - a `kais train` database's config: `relu1`, the only head before the option existed (databases
 *   written before 1bf0b8c hold none), as loadCmmacFromDb has always read it.
 * UsageError naming the file and the field.
 */
export function actorHeadOf(file: string, head: unknown, source: 'sidecar' | 'database'): HeadActivation {
  if (head === undefined && source === 'database') return 'relu1';
  if (typeof head === 'string' && (HEAD_ACTIVATIONS as readonly string[]).includes(head)) return head as HeadActivation;
  const where = source === 'sidecar' ? `${file}.json: head` : `${file}: config head`;
  const got = head === undefined ? 'missing' : `got ${JSON.stringify(head) ?? String(head)}`;
  throw new UsageError(`${where} must be ${HEAD_ACTIVATIONS.join(' or ')} (the actor's output head), ${got}`, 'KAIS_ERR_CHECKPOINT');
}

/** An exported actor's `<file>.json`, its head checked (actorHeadOf). UsageError (one line) if unreadable. */
function readSidecar(file: string): ExportedActorMeta {
  let meta: unknown;
  try {
    meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8'));
  } catch (e) {
    throw checkpointError(file, oneLine(e));
  }
  if (typeof meta !== 'object' || meta === null || Array.isArray(meta)) throw checkpointError(file, `${file}.json holds no JSON object`);
  const m = meta as ExportedActorMeta;
  return { ...m, head: actorHeadOf(file, m.head, 'sidecar') };
}

/** Actor tensors (with shapes) and head of an exported actor file, for publishing as weights. */
export function readActorFile(file: string): { shapes: number[][]; tensors: Float32Array[]; head: HeadActivation } {
  const meta = readSidecar(file);
  try {
    const body = weightsFromBytes(fs.readFileSync(file));
    return { shapes: body.shapes, tensors: body.tensors, head: meta.head };
  } catch (e) {
    throw checkpointError(file, oneLine(e));
  }
}

/**
 * Head of a checkpoint's actor: an exported actor's `.json`, or a `kais train` database's config
 * (`relu1` when it has none, as loadCmmacFromDb reads it); checked by actorHeadOf. UsageError (one
 * line) if unreadable or not a known head.
 */
export function checkpointHead(path: string): HeadActivation {
  if (isActorFile(path)) return readSidecar(path).head;
  const db = CheckpointDb.open(path, 'read');
  try {
    return actorHeadOf(path, db.config<{ head?: unknown }>()?.head, 'database');
  } finally {
    db.close();
  }
}

/**
 * The actor weights (with shapes) and head the orchestrator publishes from a checkpoint: an
 * exported actor file's, or from a `kais train` database the checkpoint `kais eval --checkpoint`
 * and `--export-actor` use (the best held-out evaluation, meta `best`; the newest without one), so
 * what is deployed is what was evaluated.
 */
export function checkpointActor(path: string): {
  tensors: { shape: number[]; data: Float32Array }[];
  head: HeadActivation;
  act: ModelAct;
} {
  const act = modelAct(path);
  if (isActorFile(path)) {
    const a = readActorFile(path);
    return { tensors: a.tensors.map((data, i) => ({ shape: a.shapes[i], data })), head: a.head, act };
  }
  const db = CheckpointDb.open(path, 'read');
  try {
    const ck = db.latest(db.meta<{ frame: number }>('best')?.frame);
    if (!ck) throw checkpointError(path, 'no checkpoint written yet');
    const head = actorHeadOf(path, db.config<{ head?: unknown }>()?.head, 'database');
    return { tensors: ck.actor.map((data, i) => ({ shape: ck.actorShapes[i], data })), head, act };
  } finally {
    db.close();
  }
}

/** True when `file` is an exported actor (has its .json sidecar) rather than a kais train database. */
export function isActorFile(file: string): boolean {
  return fs.existsSync(`${file}.json`);
}

/**
 * checkpointActor, checked against `scenario`'s actor (actor-fit.ts) before anything starts: the
 * orchestrator's `checkpoint`. UsageError naming the file, what it holds and what the scenario needs.
 */
export function deployableActor(path: string, scenario: Scenario): ReturnType<typeof checkpointActor> {
  const ck = checkpointActor(path);
  const needs = scenarioActor(scenario);
  const shapes = ck.tensors.map((t) => t.shape);
  if (!actorFit(shapes, { ...needs, hidden: ACTOR_HIDDEN })) {
    throw new UsageError(
      `checkpoint ${path} holds ${actorHolds(shapes)}; scenario ${scenario.name} needs ${needs.obsDim} inputs and ${needs.numActions} actions (a checkpoint of another scenario?)`,
    );
  }
  return ck;
}
