/**
 * The `kais train` checkpoint file: one SQLite file (better-sqlite3) that training writes and
 * everything that deploys or evaluates a trained actor reads (kais eval --checkpoint, the
 * orchestrator's `checkpoint`, kais up --checkpoint, kais export).
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
 * Anything unreadable (not SQLite, truncated, missing tables, bad checksum, another scenario)
 * throws UsageError with one line naming the file (a `-wal` or `-shm` the refused open made beside
 * it is removed again). A zero-byte file opened to write (a run killed before its first write)
 * starts fresh, with one log line saying so.
 */
import * as fs from 'fs';
import Database from 'better-sqlite3';
import { KaisError, UsageError } from '../errors';
import { absentCompanions, removeCompanions } from '../sqlite-companions';
import { packWeights, weightsFromBytes, weightsToBytes } from '../protocol/weights';
import { isScenarioFile, type Scenario } from '../scenario';
import { hashString } from '../rng';

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

/** The one-line error for a file that is not a usable checkpoint (or exported actor). */
export function checkpointError(path: string, why: string): UsageError {
  return new UsageError(`${path}: not a usable kais checkpoint (${why})`, 'KAIS_ERR_CHECKPOINT');
}

/** The first line of an error's message. */
export function oneLine(e: unknown): string {
  return (e instanceof Error ? e.message : String(e)).split('\n')[0];
}

/**
 * A write the disk had no room for (SQLite's SQLITE_FULL, ENOSPC): the file system's failure, not
 * the user's input, so `kais train` prints its one line and exits 1. A failed write is rolled back,
 * so the file keeps its last complete checkpoint. `message` starts with the file's path.
 */
export class DiskFullError extends KaisError {
  constructor(
    readonly file: string,
    /** what was being written: `the checkpoint of episode 3`, `the run config` */
    readonly what: string,
    /** what became of the file (the caller knows) */
    readonly outcome = 'the last complete checkpoint is kept',
  ) {
    super('KAIS_ERR_DISK_FULL', `${file}: disk full while writing ${what} (${outcome})`);
    this.name = 'DiskFullError';
  }
}

/** Whether `e` is SQLite's (or the file system's) "no room left". */
export function isDiskFull(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return code === 'SQLITE_FULL' || code === 'ENOSPC' || /\bdatabase or disk is full\b/.test(oneLine(e));
}

/** Runs a write; a full disk becomes a DiskFullError naming the file and what was being written. */
function writing<T>(path: string, what: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (isDiskFull(e)) throw new DiskFullError(path, what);
    throw e;
  }
}

/** The tables a checkpoint file holds (anything else is another program's database). */
const CHECKPOINT_TABLES = ['meta', 'checkpoints', 'metrics'];

export class CheckpointDb {
  private constructor(
    private readonly db: Database.Database,
    readonly path: string,
  ) {}

  /**
   * Opens (and for `create`, initialises) a checkpoint file. `log` gets the line of a zero-byte
   * file that `create` starts fresh (default: stderr, as `kais train` logs).
   */
  static open(
    path: string,
    mode: 'create' | 'read',
    log: (line: string) => void = (line) => process.stderr.write(`${line}\n`),
  ): CheckpointDb {
    if (mode === 'read' && !fs.existsSync(path)) throw new UsageError(`${path}: no such checkpoint file`, 'KAIS_ERR_CHECKPOINT');
    const existed = fs.lstatSync(path, { throwIfNoEntry: false }) !== undefined;
    let emptyFile = fs.statSync(path, { throwIfNoEntry: false })?.size === 0;
    const absent = absentCompanions(path);
    let db: Database.Database | null = null;
    try {
      db = new Database(path, { readonly: mode === 'read', fileMustExist: mode === 'read' });
      // a damaged file (pages overwritten where no checksum of ours looks) is refused before a
      // resume writes more into it; quick_check reads every page once
      const check = String(db.pragma('quick_check(1)', { simple: true }));
      if (check !== 'ok') {
        db.close();
        throw checkpointError(path, `a damaged database (SQLite quick_check: ${check.split('\n')[0]})`);
      }
      // another program's database is refused before anything is written into it
      const tables = (db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[]).map((t) => t.name);
      const foreign = tables.filter((t) => !CHECKPOINT_TABLES.includes(t));
      emptyFile &&= tables.length === 0;
      if (foreign.length > 0 || (tables.length > 0 && !tables.includes('meta'))) {
        db.close();
        throw checkpointError(
          path,
          `another program's database: it holds table${foreign.length === 1 ? '' : 's'} ${(foreign.length > 0 ? foreign : tables).slice(0, 3).join(', ')}`,
        );
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
        throw checkpointError(path, `format ${fmt.value}, this build reads ${CHECKPOINT_FORMAT}`);
      }
    } catch (e) {
      // a refused file is left as it was: no -wal / -shm of this open stays beside it
      // (unless the file is locked: then another process has it open, and they may be that process's)
      if (db?.open) db.close();
      removeCompanions(absent, e);
      if (e instanceof UsageError) throw e;
      if (mode === 'create' && isDiskFull(e)) {
        // no room to start the file: the file this open made goes again (a 0-byte one would read as a run to resume)
        if (!existed) fs.rmSync(path, { force: true });
        throw new DiskFullError(path, 'its first pages', existed ? 'the file is left as it was' : 'no file is left behind');
      }
      // an exported actor read without its sidecar looks like a broken database: say what is missing
      if (mode === 'read' && path.endsWith('.bin') && !fs.existsSync(`${path}.json`))
        throw checkpointError(path, `no ${path}.json beside it: an exported actor is the .bin and its .json (kais export writes both)`);
      throw checkpointError(path, oneLine(e));
    }
    // a zero-byte file is what a run killed before its first write leaves: starting over is the
    // exact resume, but not a silent one
    if (emptyFile && mode === 'create') log(`${path} is empty (0 bytes): starting a fresh run`);
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
      throw checkpointError(this.path, oneLine(e));
    }
  }

  writeConfig(config: unknown): void {
    const put = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    writing(this.path, 'the run config', () =>
      this.db.transaction(() => {
        put.run('format', CHECKPOINT_FORMAT);
        put.run('config', JSON.stringify(config));
      })(),
    );
  }

  /** A JSON meta value (e.g. 'best': the best held-out evaluation), or null. */
  meta<T>(key: string): T | null {
    try {
      const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as T) : null;
    } catch (e) {
      throw checkpointError(this.path, oneLine(e));
    }
  }

  /** Writes a checkpoint, the metrics of the frames it covers and meta values, atomically. */
  writeCheckpoint(c: CheckpointRow, metrics: { frame: number; json: unknown }[], meta: Record<string, unknown> = {}): void {
    const actor = weightsToBytes(
      packWeights(
        c.actor.map((data, i) => ({ data, shape: c.actorShapes[i] })),
        c.state.weightVersion,
      ),
    );
    const critic = weightsToBytes(
      packWeights(
        c.critic.map((data, i) => ({ data, shape: c.criticShapes[i] })),
        c.state.weightVersion,
      ),
    );
    const adam = weightsToBytes(
      packWeights(
        c.adam.map((data, i) => ({ data, shape: c.adamShapes[i] })),
        c.state.weightVersion,
      ),
    );
    const putC = this.db.prepare(
      'INSERT OR REPLACE INTO checkpoints (episode, frame, actor, critic, adam, state) VALUES (?, ?, ?, ?, ?, ?)',
    );
    const putM = this.db.prepare('INSERT OR REPLACE INTO metrics (frame, json) VALUES (?, ?)');
    const putMeta = this.db.prepare('INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)');
    writing(this.path, `the checkpoint of episode ${c.episode}`, () =>
      this.db.transaction(() => {
        putC.run(c.episode, c.frame, actor, critic, adam, JSON.stringify(c.state));
        for (const m of metrics) putM.run(m.frame, JSON.stringify(m.json));
        for (const [k, v] of Object.entries(meta)) putMeta.run(k, JSON.stringify(v));
      })(),
    );
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
      throw checkpointError(this.path, oneLine(e));
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
      throw checkpointError(this.path, `checkpoint of episode ${row.episode}: ${oneLine(e)}`);
    }
  }

  /** The stored per-frame metrics rows, parsed (T: the row type the writer stored). */
  metrics<T = Record<string, unknown>>(): { frame: number; json: T }[] {
    try {
      return (this.db.prepare('SELECT frame, json FROM metrics ORDER BY frame').all() as { frame: number; json: string }[]).map((r) => ({
        frame: r.frame,
        json: JSON.parse(r.json) as T,
      }));
    } catch (e) {
      throw checkpointError(this.path, oneLine(e));
    }
  }

  /** Drops metrics of frames after `frame` (written by a run killed after its last checkpoint). */
  truncateMetrics(frame: number): void {
    writing(this.path, 'the metrics', () => this.db.prepare('DELETE FROM metrics WHERE frame >= ?').run(frame));
  }
}

export function checkScenario(path: string, cfg: { scenarioFingerprint: string; scenario: string }, scenario: Scenario): void {
  if (cfg.scenarioFingerprint !== scenarioFingerprint(scenario)) {
    const same = cfg.scenario === scenario.name;
    // a scenario file is stored by its path, not its name: say that its contents differ (edited since, or another file)
    const file = !same && isScenarioFile(cfg.scenario);
    throw new UsageError(
      same
        ? `${path}: trained on a different version of scenario "${scenario.name}" (fingerprint ${cfg.scenarioFingerprint})`
        : file
          ? `${path}: trained on the scenario file ${cfg.scenario} as it was then (fingerprint ${cfg.scenarioFingerprint}); the scenario given now ("${scenario.name}") is not that one: the file was edited since, or another was given`
          : `${path}: trained on scenario "${cfg.scenario}", not "${scenario.name}"`,
      'KAIS_ERR_CHECKPOINT',
    );
  }
}

/**
 * `kais train --init-from`'s checkpoint: another run's latest (same scenario), or a UsageError
 * naming the flag. Read before the new run's --out is created (training/jobs/train-options.ts) and
 * again when the run starts (train-checkpoint.ts initFrom).
 */
export function initCheckpoint(file: string, scenario: Scenario): CheckpointRow {
  const src = CheckpointDb.open(file, 'read');
  try {
    const cfg = src.config<{ scenarioFingerprint: string; scenario: string }>();
    if (!cfg) throw new UsageError(`--init-from ${file}: no config row`);
    checkScenario(file, cfg, scenario);
    const ck = src.latest();
    if (!ck) throw new UsageError(`--init-from ${file}: no checkpoint written yet`);
    return ck;
  } finally {
    src.close();
  }
}
