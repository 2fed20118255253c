/**
 * `kais train` checkpoints in one SQLite file (better-sqlite3), and loading a trained `cmmac`
 * policy from it (`loadCmmacFromDb`, for `kais eval --checkpoint` and the agent).
 *
 * Tables:
 * - `meta(key TEXT PRIMARY KEY, value TEXT)`: `config` = the resolved run config (JSON, first row
 *   a run writes), `format` = CHECKPOINT_FORMAT;
 * - `checkpoints(episode INTEGER PRIMARY KEY, frame, actor BLOB, critic BLOB, adam BLOB, state TEXT)`:
 *   after each finished episode; `actor`/`critic`/`adam` are shared/protocol/weights.ts buffers
 *   (raw little-endian float32 with a CRC-32), `state` is JSON (Adam step counts, Rng states,
 *   weight version);
 * - `metrics(frame INTEGER PRIMARY KEY, json TEXT)`: one row per trained frame.
 * Every write is one transaction, so a killed run leaves the last complete checkpoint.
 *
 * Anything unreadable (not SQLite, truncated, missing tables, bad checksum, another scenario or
 * shape) throws UsageError with one line naming the file.
 */
import * as fs from 'fs';
import { join as pathJoin } from 'path';
import Database from 'better-sqlite3';
import { UsageError } from '../../shared/errors';
import { packWeights, weightsFromBytes, weightsToBytes } from '../../shared/protocol/weights';
import type { Scenario } from '../../shared/scenario';
import { topologyOf } from '../../shared/scenario';
import { hashString } from '../../shared/rng';
import { CmmacDispatch, type ActMode } from '../../agent/actor-policy';
import { observationDim } from '../../agent/observation';
import { actorArrayCount, type HeadActivation } from '../../shared/nets/actor';

export const CHECKPOINT_FORMAT = 'kais-train-v1';

export interface CheckpointRow {
  episode: number;
  /** frames trained when it was written */
  frame: number;
  actor: Float32Array[];
  actorShapes: number[][];
  critic: Float32Array[];
  criticShapes: number[][];
  /** actor m, actor v, critic m, critic v moments, concatenated in that order */
  adam: Float32Array[];
  adamShapes: number[][];
  state: CheckpointState;
}

export interface CheckpointState {
  weightVersion: number;
  actorAdamStep: number;
  criticAdamStep: number;
  rng: Record<string, number[]>;
}

/** Fingerprint of a scenario (name + content), stored with the config to refuse mismatches. */
export function scenarioFingerprint(s: Scenario): string {
  return `${s.name}:${(hashString(JSON.stringify(s)) >>> 0).toString(16)}`;
}

function bad(path: string, why: string): UsageError {
  return new UsageError(`${path}: not a usable kais checkpoint (${why})`, 'KAIS_ERR_CHECKPOINT');
}

function oneLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}

/** The tables a checkpoint file holds (anything else is another program's database). */
const CHECKPOINT_TABLES = ['meta', 'checkpoints', 'metrics'];

export class CheckpointDb {
  private constructor(
    private readonly db: Database.Database,
    readonly path: string,
  ) {}

  /** Opens (and for `create`, initialises) a checkpoint file. */
  static open(path: string, mode: 'create' | 'read'): CheckpointDb {
    if (mode === 'read' && !fs.existsSync(path)) throw new UsageError(`${path}: no such checkpoint file`, 'KAIS_ERR_CHECKPOINT');
    let db: Database.Database;
    try {
      db = new Database(path, { readonly: mode === 'read', fileMustExist: mode === 'read' });
      // another program's database is refused before anything is written into it
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
      const foreign = tables.filter((t) => !CHECKPOINT_TABLES.includes(t));
      if (foreign.length > 0 || (tables.length > 0 && !tables.includes('meta'))) {
        db.close();
        throw bad(path, `another program's database: it holds table${foreign.length === 1 ? '' : 's'} ${(foreign.length > 0 ? foreign : tables).slice(0, 3).join(', ')}`);
      }
      if (mode === 'create') {
        db.exec(`
          CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
          CREATE TABLE IF NOT EXISTS checkpoints (episode INTEGER PRIMARY KEY, frame INTEGER NOT NULL,
            actor BLOB NOT NULL, critic BLOB NOT NULL, adam BLOB NOT NULL, state TEXT NOT NULL);
          CREATE TABLE IF NOT EXISTS metrics (frame INTEGER PRIMARY KEY, json TEXT NOT NULL);
        `);
      }
      db.prepare('SELECT count(*) FROM checkpoints').get();
      db.prepare('SELECT count(*) FROM metrics').get();
      const fmt = db.prepare("SELECT value FROM meta WHERE key = 'format'").get() as { value: string } | undefined;
      if (fmt && fmt.value !== CHECKPOINT_FORMAT) {
        db.close();
        throw bad(path, `format ${fmt.value}, this build reads ${CHECKPOINT_FORMAT}`);
      }
    } catch (e) {
      if (e instanceof UsageError) throw e;
      throw bad(path, oneLine(e));
    }
    return new CheckpointDb(db, path);
  }

  close(): void {
    this.db.close();
  }

  /** The stored resolved config, or null for a fresh file. */
  config<T>(): T | null {
    try {
      const row = this.db.prepare("SELECT value FROM meta WHERE key = 'config'").get() as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as T) : null;
    } catch (e) {
      throw bad(this.path, oneLine(e));
    }
  }

  writeConfig(config: unknown): void {
    const put = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    this.db.transaction(() => {
      put.run('format', CHECKPOINT_FORMAT);
      put.run('config', JSON.stringify(config));
    })();
  }

  /** A JSON meta value (e.g. 'best': the best held-out evaluation), or null. */
  meta<T>(key: string): T | null {
    try {
      const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as T) : null;
    } catch (e) {
      throw bad(this.path, oneLine(e));
    }
  }

  /** Writes a checkpoint, the metrics of the frames it covers and meta values, atomically. */
  writeCheckpoint(c: CheckpointRow, metrics: { frame: number; json: unknown }[], meta: Record<string, unknown> = {}): void {
    const actor = weightsToBytes(packWeights(c.actor.map((data, i) => ({ data, shape: c.actorShapes[i] })), c.state.weightVersion));
    const critic = weightsToBytes(packWeights(c.critic.map((data, i) => ({ data, shape: c.criticShapes[i] })), c.state.weightVersion));
    const adam = weightsToBytes(packWeights(c.adam.map((data, i) => ({ data, shape: c.adamShapes[i] })), c.state.weightVersion));
    const putC = this.db.prepare('INSERT OR REPLACE INTO checkpoints (episode, frame, actor, critic, adam, state) VALUES (?, ?, ?, ?, ?, ?)');
    const putM = this.db.prepare('INSERT OR REPLACE INTO metrics (frame, json) VALUES (?, ?)');
    const putMeta = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    this.db.transaction(() => {
      putC.run(c.episode, c.frame, actor, critic, adam, JSON.stringify(c.state));
      for (const m of metrics) putM.run(m.frame, JSON.stringify(m.json));
      for (const [k, v] of Object.entries(meta)) putMeta.run(k, JSON.stringify(v));
    })();
  }

  /**
   * The newest checkpoint (with at most `maxFrame` frames trained), or null when there is none.
   * Throws UsageError when it is corrupt.
   */
  latest(maxFrame = Number.MAX_SAFE_INTEGER): CheckpointRow | null {
    let row: { episode: number; frame: number; actor: Buffer; critic: Buffer; adam: Buffer; state: string } | undefined;
    try {
      row = this.db.prepare('SELECT * FROM checkpoints WHERE frame <= ? ORDER BY episode DESC LIMIT 1').get(maxFrame) as typeof row;
    } catch (e) {
      throw bad(this.path, oneLine(e));
    }
    if (!row) return null;
    try {
      const actor = weightsFromBytes(row.actor);
      const critic = weightsFromBytes(row.critic);
      const adam = weightsFromBytes(row.adam);
      const state = JSON.parse(row.state) as CheckpointState;
      return {
        episode: row.episode,
        frame: row.frame,
        actor: actor.tensors,
        actorShapes: actor.shapes,
        critic: critic.tensors,
        criticShapes: critic.shapes,
        adam: adam.tensors,
        adamShapes: adam.shapes,
        state,
      };
    } catch (e) {
      throw bad(this.path, `checkpoint of episode ${row.episode}: ${oneLine(e)}`);
    }
  }

  /** Metrics rows in frame order. */
  /** The stored per-frame metrics rows, parsed (T: the row type the writer stored). */
  metrics<T = Record<string, unknown>>(): { frame: number; json: T }[] {
    try {
      return (this.db.prepare('SELECT frame, json FROM metrics ORDER BY frame').all() as { frame: number; json: string }[]).map((r) => ({
        frame: r.frame,
        json: JSON.parse(r.json) as T,
      }));
    } catch (e) {
      throw bad(this.path, oneLine(e));
    }
  }

  /** Drops metrics of frames after `frame` (written by a run killed after its last checkpoint). */
  truncateMetrics(frame: number): void {
    this.db.prepare('DELETE FROM metrics WHERE frame >= ?').run(frame);
  }
}

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
 * trained on). `mode`: 'argmax' (default) or 'sample' (seeded per episode by reset()). `maxFrame`:
 * the newest checkpoint with at most that many frames trained; default: the checkpoint of the best
 * held-out evaluation when the run evaluated (`--eval-every`), else the newest. `which: 'latest'`
 * ignores the best evaluation.
 */
export function loadCmmacFromDb(path: string, scenario: Scenario, options: { mode?: ActMode; maxFrame?: number; which?: 'best' | 'latest' } = {}): CmmacDispatch {
  const db = CheckpointDb.open(path, 'read');
  try {
    const cfg = db.config<StoredConfig>();
    if (!cfg) throw bad(path, 'no config row');
    checkScenario(path, cfg, scenario);
    const best = options.maxFrame === undefined && options.which !== 'latest' ? db.meta<{ frame: number }>('best') : null;
    const ck = db.latest(options.maxFrame ?? best?.frame);
    if (!ck) throw bad(path, options.maxFrame === undefined ? 'no checkpoint written yet' : `no checkpoint at or before frame ${options.maxFrame}`);
    const topo = topologyOf(scenario);
    const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
    const headBias = ck.actorShapes[actorArrayCount() - 1];
    if (ck.actorShapes[0]?.[0] !== observationDim(shape) || headBias?.[0] !== shape.numTargets) {
      throw bad(path, `actor shapes do not fit scenario ${scenario.name}`);
    }
    return new CmmacDispatch({
      shape,
      queueCapPerReplica: scenario.queueCapPerReplica,
      weights: ck.actor,
      version: ck.state.weightVersion,
      mode: options.mode ?? 'argmax',
      head: cfg.head ?? 'relu1',
    });
  } finally {
    db.close();
  }
}

export function checkScenario(path: string, cfg: { scenarioFingerprint: string; scenario: string }, scenario: Scenario): void {
  if (cfg.scenarioFingerprint !== scenarioFingerprint(scenario)) {
    const same = cfg.scenario === scenario.name;
    throw new UsageError(
      same
        ? `${path}: trained on a different version of scenario "${scenario.name}" (fingerprint ${cfg.scenarioFingerprint})`
        : `${path}: trained on scenario "${cfg.scenario}", not "${scenario.name}"`,
      'KAIS_ERR_CHECKPOINT',
    );
  }
}

/** The `.json` written next to an exported actor (`kais train --export-actor`). */
interface ExportedActorMeta {
  scenario: string;
  scenarioFingerprint: string;
  head: HeadActivation;
  obsDim: number;
  numActions: number;
}

/** Folders searched for shipped models: `models/` at the package root, from source or from dist/. */
export function modelDirs(): string[] {
  return [pathJoin(__dirname, '..', '..', 'models'), pathJoin(__dirname, '..', '..', '..', 'models')];
}

/**
 * A `cmmac` dispatcher from an exported actor (`<file>` weights + `<file>.json`), checked against
 * the scenario. Throws UsageError (one line) when it is unreadable or made for something else.
 */
export function loadActorFile(file: string, scenario: Scenario, options: { mode?: ActMode } = {}): CmmacDispatch {
  let meta: ExportedActorMeta;
  let arrays: Float32Array[];
  try {
    meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as ExportedActorMeta;
    arrays = weightsFromBytes(fs.readFileSync(file)).tensors;
  } catch (e) {
    throw bad(file, oneLine(e));
  }
  checkScenario(file, meta, scenario);
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  if (meta.obsDim !== observationDim(shape) || meta.numActions !== shape.numTargets) throw bad(file, `actor shapes do not fit scenario ${scenario.name}`);
  return new CmmacDispatch({ shape, queueCapPerReplica: scenario.queueCapPerReplica, weights: arrays, mode: options.mode ?? 'argmax', head: meta.head });
}

/** Path of the model the project ships for a scenario, or null. */
export function defaultModelPath(scenario: Scenario): string | null {
  for (const dir of modelDirs()) {
    const file = pathJoin(dir, `${scenario.name}-cmmac.bin`);
    if (fs.existsSync(file) && fs.existsSync(`${file}.json`)) return file;
  }
  return null;
}

/** Actor tensors (with shapes) and head of an exported actor file, for publishing as weights. */
export function readActorFile(file: string): { shapes: number[][]; tensors: Float32Array[]; head: HeadActivation } {
  try {
    const meta = JSON.parse(fs.readFileSync(`${file}.json`, 'utf8')) as ExportedActorMeta;
    const body = weightsFromBytes(fs.readFileSync(file));
    return { shapes: body.shapes, tensors: body.tensors, head: meta.head };
  } catch (e) {
    throw bad(file, oneLine(e));
  }
}

/**
 * Head of a checkpoint's actor: an exported actor's `.json`, or a `kais train` database's config
 * (`relu1` when it has none, as loadCmmacFromDb reads it). UsageError (one line) if unreadable.
 */
export function checkpointHead(path: string): HeadActivation {
  if (isActorFile(path)) {
    try {
      return (JSON.parse(fs.readFileSync(`${path}.json`, 'utf8')) as ExportedActorMeta).head;
    } catch (e) {
      throw bad(path, oneLine(e));
    }
  }
  const db = CheckpointDb.open(path, 'read');
  try {
    return db.config<{ head?: HeadActivation }>()?.head ?? 'relu1';
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
export function checkpointActor(path: string): { tensors: { shape: number[]; data: Float32Array }[]; head: HeadActivation } {
  if (isActorFile(path)) {
    const a = readActorFile(path);
    return { tensors: a.tensors.map((data, i) => ({ shape: a.shapes[i], data })), head: a.head };
  }
  const db = CheckpointDb.open(path, 'read');
  try {
    const ck = db.latest(db.meta<{ frame: number }>('best')?.frame);
    if (!ck) throw bad(path, 'no checkpoint written yet');
    const head = db.config<{ head?: HeadActivation }>()?.head ?? 'relu1';
    return { tensors: ck.actor.map((data, i) => ({ shape: ck.actorShapes[i], data })), head };
  } finally {
    db.close();
  }
}

/** True when `file` is an exported actor (has its .json sidecar) rather than a kais train database. */
export function isActorFile(file: string): boolean {
  return fs.existsSync(`${file}.json`);
}

/**
 * The model the project ships for a scenario (`models/<scenario>-cmmac.bin`, made by the command in
 * docs/cmmac.md), or null when none ships. A shipped file that does not fit (the scenario changed
 * since it was trained, or it is corrupt) throws UsageError with one line.
 */
export function loadDefaultCmmac(scenario: Scenario, options: { mode?: ActMode } = {}): CmmacDispatch | null {
  for (const dir of modelDirs()) {
    const file = pathJoin(dir, `${scenario.name}-cmmac.bin`);
    if (fs.existsSync(file) && fs.existsSync(`${file}.json`)) return loadActorFile(file, scenario, options);
  }
  return null;
}
