/**
 * Everything the orchestrator must keep across a restart, in one SQLite file (better-sqlite3,
 * WAL): the agents it has seen, every model version (actor weights as a `weightsToBytes` BLOB),
 * every placement, metrics, and a bounded ring of experience batches.
 *
 * Opening an existing file resumes: `latestModel()` and `latestPlacement()` return what was
 * current when the process stopped, even after SIGKILL (each write is its own transaction, and
 * WAL makes a committed write durable against a process crash).
 *
 * Synchronous on purpose: better-sqlite3 calls take microseconds for rows this size, and a
 * synchronous store cannot interleave two writers inside one process.
 *
 * Schema version history: 1 (initial; the `learner`, `events` and `rejected_models` tables and the `epoch` meta key
 * were added later with CREATE IF NOT EXISTS / INSERT OR IGNORE, so older files gain them on open
 * and stay readable).
 *
 * Epoch: every store file gets a random `epoch` id when it is created (or first opened by a build
 * that knows epochs). Weight and placement versions are numbered within an epoch: a lost or
 * replaced database starts a new epoch at v1, and agents that hold v3 of the old epoch follow
 * the new one (docs/protocol.md, "Epochs") instead of ignoring every version up to 3.
 *
 * Bounds (`StoreLimits`): experience is kept by count, bytes and age, metrics and events by rows
 * and age; `prune()` enforces them (the orchestrator calls it in the background) and hands freed
 * pages back with an incremental vacuum, so the file stays near its limits however long a flood.
 *
 * Opening checks the file before writing anything into it: not a SQLite file, a truncated or
 * corrupt one, or the SQLite file of something else (a `kais train` checkpoint, any other
 * program's) is refused with a `StoreError` saying which, and the file is left untouched (a `-wal`
 * or `-shm` that the refused open made beside it is removed again). A zero-byte file (a process
 * killed before its first write) is not refused: the store starts fresh there, and says so in one
 * log line.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import { KaisError } from '../shared/errors';
import { absentCompanions, removeCompanions } from '../shared/sqlite-companions';
import { lineLogger, processLogger } from '../shared/log';
import { Codec } from '../shared/protocol/codec';
import type { EapId } from '../shared/domain';
import { makeFrame, type ExperienceBody, type PlacementBody, type WeightsBody } from '../shared/protocol/envelope';
import { packWeights, weightsFromBytes, weightsToBytes } from '../shared/protocol/weights';

export const STORE_SCHEMA_VERSION = 1;

/** A store file that cannot be used (missing folder, not SQLite, corrupt, foreign, unwritable): one line. */
export class StoreError extends KaisError {
  constructor(message: string, code = 'KAIS_ERR_STORE') {
    super(code, message);
    this.name = 'StoreError';
  }
}

/** Size and age limits of the growing tables (0 or Infinity: no limit of that kind). */
export interface StoreLimits {
  /** Bytes of stored experience frames. @defaultValue 256 MiB */
  experienceMaxBytes: number;
  /** Oldest experience batch kept, ms. @defaultValue 1 hour */
  experienceMaxAgeMs: number;
  /** Rows of the `metrics` table. @defaultValue 1,000,000 */
  metricsMaxRows: number;
  /** Oldest metric point kept, ms. @defaultValue 7 days */
  metricsMaxAgeMs: number;
  /** Rows of the `events` table. @defaultValue 100,000 */
  eventsMaxRows: number;
  /** Oldest event kept, ms. @defaultValue 30 days */
  eventsMaxAgeMs: number;
  /**
   * Weight versions kept (the newest; a running canary's good version is kept too, whatever its
   * age): one is 1.6 MB on kais (measured in a kais up store: the actor with its light actor), and
   * online learning publishes one every 10-60 s, so unbounded they fill the 4 GiB `fileMaxBytes` in a
   * day or two. @defaultValue 100
   */
  modelsMaxRows: number;
  /** Placement versions kept (the newest; one a frame, 25 s on the built-in scenarios). @defaultValue 20,000 */
  placementsMaxRows: number;
  /**
   * Hard cap of the database file (SQLite `max_page_count`): a write that would grow it further
   * fails with SQLITE_FULL, as on a full disk (the orchestrator backs off; prune frees pages).
   * @defaultValue 4 GiB
   */
  fileMaxBytes: number;
}

export const DEFAULT_STORE_LIMITS: StoreLimits = {
  experienceMaxBytes: 256 * 1024 * 1024,
  experienceMaxAgeMs: 3_600_000,
  metricsMaxRows: 1_000_000,
  metricsMaxAgeMs: 7 * 86_400_000,
  eventsMaxRows: 100_000,
  eventsMaxAgeMs: 30 * 86_400_000,
  modelsMaxRows: 100,
  placementsMaxRows: 20_000,
  fileMaxBytes: 4 * 1024 * 1024 * 1024,
};

/** One thing the operator should know about (a refused session, a quarantine, a new epoch, a store failure). */
export interface StoreEvent {
  tsMs: number;
  /** Short kebab-case kind: `auth`, `duplicate-hello`, `invalid-experience`, `rate-limit`, `quarantine`, `epoch`, `kl-refused`, `update-failed`, `store`... */
  kind: string;
  eap: EapId | null;
  session: string | null;
  message: string;
}

/** What one `prune()` deleted. */
export interface PruneResult {
  experience: number;
  metrics: number;
  events: number;
  models: number;
  placements: number;
}

/** SQLite's own error codes for a store that cannot be written (disk full, read-only, I/O). */
export function isStoreWriteError(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^SQLITE_(FULL|READONLY|IOERR|CANTOPEN|BUSY|LOCKED|CORRUPT|NOTADB|PERM)/.test(code);
}

export interface StoreOptions {
  /**
   * Most experience batches kept; the oldest is overwritten once the ring is full. Fixed when the
   * file is created; reopening with another value keeps the file's.
   * @defaultValue 10,000
   */
  experienceCapacity?: number;
  /**
   * Open read-only (for `kais status` against a running orchestrator's file).
   * @defaultValue false
   */
  readonly?: boolean;
  /** Size and age limits enforced by `prune()`. @defaultValue DEFAULT_STORE_LIMITS */
  limits?: Partial<StoreLimits>;
  /**
   * Where the open reports what the operator should know (a zero-byte file started fresh).
   * @defaultValue an `orchestrator` JSON-lines logger on stderr (shared/log.ts)
   */
  log?: (line: string) => void;
}

/** What the store remembers of one eAP's agent. */
export interface AgentRecord {
  eapId: EapId;
  /** Session of the last accepted `hello`, `null` before any. */
  sessionId: string | null;
  /** Agent build version from its `hello`. */
  agentVersion: string;
  /** Weight version the agent holds: from its `hello`, then from its acks. */
  weightVersion: number | null;
  placementVersion: number | null;
  connected: boolean;
  /** Last time anything was recorded for this agent (ms since epoch). */
  lastSeenMs: number;
}

export interface ModelRecord {
  version: number;
  checksum: number;
  createdMs: number;
  /** Size of the stored BLOB. */
  bytes: number;
}

/** A fitted learned device detector (orchestrator/detector.ts). */
export interface StoredDetector {
  /** Node shape key ("cores/GB"). */
  key: string;
  dims: number;
  steps: number;
  /** Healthy windows it was fitted on. */
  fitWindows: number;
  weights: Float32Array[];
}

export interface MetricPoint {
  tsMs: number;
  name: string;
  eap: EapId | null;
  value: number;
}

/** One stored experience batch, oldest first in `readExperience`. */
export interface ExperienceRecord {
  /** Position in the stream of all batches ever appended (0, 1, 2, ...). */
  seq: number;
  tsMs: number;
  body: ExperienceBody;
}

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
  eap_id INTEGER PRIMARY KEY,
  session_id TEXT,
  agent_version TEXT NOT NULL DEFAULT '',
  weight_version INTEGER,
  placement_version INTEGER,
  connected INTEGER NOT NULL DEFAULT 0,
  last_seen_ms INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS models (
  version INTEGER PRIMARY KEY,
  checksum INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  weights BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS placements (
  version INTEGER PRIMARY KEY,
  frame INTEGER NOT NULL,
  num_services INTEGER NOT NULL,
  num_nodes INTEGER NOT NULL,
  replicas BLOB NOT NULL,
  created_ms INTEGER NOT NULL,
  actor TEXT
);
CREATE TABLE IF NOT EXISTS metrics (
  ts_ms INTEGER NOT NULL,
  name TEXT NOT NULL,
  eap INTEGER,
  value REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics (name, ts_ms);
-- The experience ring: slot = seq mod capacity, so the table never holds more than capacity rows.
CREATE TABLE IF NOT EXISTS experience (
  slot INTEGER PRIMARY KEY,
  seq INTEGER NOT NULL,
  eap INTEGER NOT NULL,
  ts_ms INTEGER NOT NULL,
  transitions INTEGER NOT NULL,
  frame BLOB NOT NULL
);
-- The learned device detectors (orchestrator/detector.ts), one per node shape.
CREATE TABLE IF NOT EXISTS detectors (
  key TEXT PRIMARY KEY,
  dims INTEGER NOT NULL,
  steps INTEGER NOT NULL,
  fit_windows INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  weights BLOB NOT NULL
);
-- The online learner's own state (orchestrator/learner.ts): experience cursor, critic weights.
CREATE TABLE IF NOT EXISTS learner (
  key TEXT PRIMARY KEY,
  value BLOB NOT NULL
);
-- Weight versions the gate or the canary rejected (issue 17), with the reason; the newest 100.
-- A gate-rejected one was never published (its weights are here only); a rolled-back canary is
-- also in models (it was published to the canary eAPs; kept there while it is among the newest
-- limits.modelsMaxRows), so its weights column is NULL. Source gate, canary or admin (kais weights).
CREATE TABLE IF NOT EXISTS rejected_models (
  ts_ms INTEGER NOT NULL,
  version INTEGER NOT NULL,
  based_on INTEGER,
  source TEXT NOT NULL,
  reason TEXT NOT NULL,
  weights BLOB
);
-- What the operator should know: refused sessions, quarantines, new epochs, store failures.
CREATE TABLE IF NOT EXISTS events (
  ts_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  eap INTEGER,
  session TEXT,
  message TEXT NOT NULL
);
`;

/** Tables a kais orchestrator store may hold; any other table means the file is someone else's. */
const OWN_TABLES = new Set([
  'meta',
  'agents',
  'models',
  'placements',
  'metrics',
  'experience',
  'detectors',
  'learner',
  'events',
  'rejected_models',
]);

/** Rows of `rejected_models` kept (the oldest go first). */
export const REJECTED_MODELS_KEPT = 100;

/** A weight version the gate or the canary rejected. */
/** Who rejected a weight version: the gate, a canary, or an admin (kais weights --rollback). */
export type RejectionSource = 'gate' | 'canary' | 'admin';

export interface RejectedModelRecord {
  tsMs: number;
  /** The version number it had (canary) or would have had (gate). */
  version: number;
  /** The version it was judged against (null: none). */
  basedOn: number | null;
  source: RejectionSource;
  reason: string;
  /** Whether its weights are kept in this row (gate); a canary's are in `models` under `version`. */
  hasWeights: boolean;
}

const SQLITE_MAGIC = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * Checks a store path before SQLite touches it: the folder exists, the file (if any) is a
 * writable regular file that starts as a SQLite database, its `-wal` / `-shm` companions (if any)
 * are writable (an unwritable `-shm` would be mapped and end in SIGBUS). Throws StoreError.
 */
function checkStorePath(path: string, readonly: boolean): void {
  if (path === ':memory:' || path === '') return;
  const dir = nodePath.dirname(nodePath.resolve(path));
  let dirStat: fs.Stats;
  try {
    dirStat = fs.statSync(dir);
  } catch {
    throw new StoreError(`${path}: folder ${dir} does not exist`);
  }
  if (!dirStat.isDirectory()) throw new StoreError(`${path}: ${dir} is not a folder`);
  let st: fs.Stats | null;
  try {
    st = fs.statSync(path);
  } catch {
    st = null;
  }
  if (st === null) {
    if (readonly) throw new StoreError(`${path}: no such file`);
    try {
      fs.accessSync(dir, fs.constants.W_OK);
    } catch {
      throw new StoreError(`${path}: folder ${dir} is not writable`);
    }
    return;
  }
  if (!st.isFile()) throw new StoreError(`${path}: not a regular file`);
  if (st.size > 0) {
    const head = Buffer.alloc(SQLITE_MAGIC.length);
    let fd: number | null = null;
    try {
      fd = fs.openSync(path, 'r');
      fs.readSync(fd, head, 0, head.length, 0);
    } catch (e) {
      throw new StoreError(`${path}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    } finally {
      if (fd !== null) fs.closeSync(fd);
    }
    if (st.size < 512 || !head.equals(SQLITE_MAGIC)) throw new StoreError(`${path}: not a SQLite database (not a kais orchestrator store)`);
  }
  if (readonly) return;
  for (const f of [path, `${path}-wal`, `${path}-shm`]) {
    if (f !== path && !fs.existsSync(f)) continue;
    try {
      fs.accessSync(f, fs.constants.R_OK | fs.constants.W_OK);
    } catch {
      throw new StoreError(`${f}: not writable (the orchestrator writes its state there)`);
    }
  }
  try {
    fs.accessSync(dir, fs.constants.W_OK);
  } catch {
    throw new StoreError(`${path}: folder ${dir} is not writable (SQLite keeps its -wal and -shm files next to the database)`);
  }
}

interface AgentRow {
  eap_id: number;
  session_id: string | null;
  agent_version: string;
  weight_version: number | null;
  placement_version: number | null;
  connected: number;
  last_seen_ms: number;
}

export class Store {
  readonly path: string;
  readonly experienceCapacity: number;
  /** Random id of this store file, fixed at creation: weight and placement versions are numbered within it. */
  readonly epoch: string;
  /** Whether this open created the store (a new epoch), rather than resuming a file. */
  readonly createdNow: boolean;
  readonly limits: StoreLimits;
  private readonly db: Database.Database;
  /** Device and inode of the file when opened (null for ':memory:'), to notice a file deleted or replaced under us. */
  private readonly fileId: string | null;
  private experienceBytesHeld = 0;
  /** Experience batches are stored as encoded `experience` frames: one validated format. */
  private readonly codec = new Codec();
  private nextExperienceSeq: number;

  private constructor(path: string, options: StoreOptions) {
    const requested = options.experienceCapacity ?? 10_000;
    if (!Number.isSafeInteger(requested) || requested <= 0) {
      throw new TypeError(`Store: options.experienceCapacity must be a positive integer, got ${requested}`);
    }
    this.limits = {
      ...DEFAULT_STORE_LIMITS,
      ...Object.fromEntries(Object.entries(options.limits ?? {}).filter(([, v]) => v !== undefined)),
    };
    for (const [k, v] of Object.entries(this.limits)) {
      if (!(typeof v === 'number' && v >= 0)) throw new TypeError(`Store: options.limits.${k} must be a number >= 0, got ${v}`);
    }
    this.path = path;
    const readonly = options.readonly ?? false;
    let epochIsNew = false;
    checkStorePath(path, readonly);
    const emptyFile = path !== ':memory:' && path !== '' && fs.statSync(path, { throwIfNoEntry: false })?.size === 0;
    const absent = absentCompanions(path);
    try {
      try {
        this.db = new Database(path, { readonly, fileMustExist: readonly });
      } catch (e) {
        throw new StoreError(`${path}: cannot open (${(e as Error).message})`);
      }
      try {
        this.checkFile(readonly);
        if (!readonly) {
          const fresh = this.tableNames().length === 0;
          // incremental vacuum must be chosen before the first table exists: pages freed by prune()
          // go back to the file system instead of staying in the file at its peak size
          if (fresh) this.db.pragma('auto_vacuum = INCREMENTAL');
          this.db.pragma('journal_mode = WAL');
          // NORMAL in WAL mode: a committed transaction survives a process crash (SIGKILL); only an
          // OS crash or power loss can roll back the last few.
          this.db.pragma('synchronous = NORMAL');
          // the -wal file is truncated back to this size after a checkpoint (a flood must not leave it at its peak)
          this.db.pragma('journal_size_limit = 16777216');
          if (this.limits.fileMaxBytes > 0 && Number.isFinite(this.limits.fileMaxBytes)) {
            const page = Number(this.db.pragma('page_size', { simple: true }));
            this.db.pragma(`max_page_count = ${Math.max(16, Math.floor(this.limits.fileMaxBytes / page))}`);
          }
          this.db.exec(SCHEMA);
          // a file from before the actor switch gains its placements' actor column (NULL: main)
          const placementColumns = this.db.prepare('PRAGMA table_info(placements)').all() as { name: string }[];
          if (!placementColumns.some((c) => c.name === 'actor')) this.db.exec('ALTER TABLE placements ADD COLUMN actor TEXT');
          epochIsNew = this.meta('epoch') === null;
          this.db
            .prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?), ('experience_capacity', ?), ('epoch', ?)`)
            .run(String(STORE_SCHEMA_VERSION), String(requested), newEpoch());
        }
      } catch (e) {
        this.db.close();
        if (e instanceof StoreError) throw e;
        throw new StoreError(`${path}: cannot use as a store (${(e as Error).message})`);
      }
      const schema = this.meta('schema_version');
      if (schema !== String(STORE_SCHEMA_VERSION)) {
        this.db.close();
        throw new StoreError(`${path} has store schema version ${schema}, this build reads ${STORE_SCHEMA_VERSION}`);
      }
    } catch (e) {
      // a refused file is left as it was: the -wal / -shm SQLite made beside it go again (unless
      // the file is locked: then another process has it open, and they may be that process's)
      removeCompanions(absent, e);
      throw e;
    }
    this.experienceCapacity = Number(this.meta('experience_capacity'));
    this.epoch = this.meta('epoch') ?? 'none';
    const last = this.db.prepare('SELECT MAX(seq) AS s, COALESCE(SUM(length(frame)), 0) AS b FROM experience').get() as {
      s: number | null;
      b: number;
    };
    this.nextExperienceSeq = last.s === null ? 0 : last.s + 1;
    this.experienceBytesHeld = last.b;
    this.createdNow = epochIsNew;
    this.fileId = fileIdentity(path);
    // a zero-byte file is what a process killed before its first write leaves: starting over is
    // the exact resume, but not a silent one
    if (emptyFile && epochIsNew) {
      (options.log ?? lineLogger(processLogger('orchestrator')))(`${path} is empty (0 bytes): starting a fresh store`);
    }
  }

  /**
   * A file SQLite can read and that is ours: the header is sound (quick_check) and every table
   * is one of a kais store, with a `meta` table naming the schema version unless it is empty.
   */
  private checkFile(readonly: boolean): void {
    let check: string;
    try {
      check = String(this.db.pragma('quick_check(1)', { simple: true }));
    } catch (e) {
      throw new StoreError(`${this.path}: not a usable SQLite database (${(e as Error).message})`);
    }
    if (check !== 'ok') throw new StoreError(`${this.path}: corrupt or truncated SQLite database (${check.slice(0, 200)})`);
    const tables = this.tableNames();
    const foreign = tables.filter((t) => !OWN_TABLES.has(t));
    if (foreign.length > 0 || (tables.length > 0 && !tables.includes('meta'))) {
      throw new StoreError(
        `${this.path}: a SQLite database of something else (tables ${tables.slice(0, 8).join(', ')}), not a kais orchestrator store`,
      );
    }
    if (tables.includes('meta')) {
      const row = this.db.prepare(`SELECT value FROM meta WHERE key = 'schema_version'`).get() as { value: string } | undefined;
      if (!row) throw new StoreError(`${this.path}: a SQLite database without a kais store schema version, not a kais orchestrator store`);
    } else if (readonly) {
      throw new StoreError(`${this.path}: an empty database, not a kais orchestrator store`);
    }
  }

  private tableNames(): string[] {
    return (
      this.db.prepare(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`).all() as { name: string }[]
    ).map((r) => r.name);
  }

  /** Opens (creating if needed) the store at `path`; ':memory:' for a throwaway one. */
  static open(path: string, options: StoreOptions = {}): Store {
    return new Store(path, options);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  /**
   * A consistent copy of the whole store (its write-ahead log included) as one new file at `file`
   * (`VACUUM INTO`, which a read-only store may run too): written beside it under a temporary name and
   * renamed, so `file` is either absent or complete. Refuses an existing file.
   */
  copyTo(file: string): void {
    if (fs.existsSync(file)) throw new StoreError(`${file} exists: the copy goes to a new file`);
    const tmp = `${file}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      this.db.prepare('VACUUM INTO ?').run(tmp);
      fs.renameSync(tmp, file);
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }

  /**
   * Why the file at `path` is no longer the one this store writes to (deleted, replaced), or null
   * while it is. Everything written after that is lost at the next start, which begins a new epoch.
   */
  fileProblem(): string | null {
    if (this.fileId === null) return null;
    const now = fileIdentity(this.path);
    if (now === null) return `${this.path} was deleted while the orchestrator was running`;
    if (now !== this.fileId) return `${this.path} was replaced by another file while the orchestrator was running`;
    return null;
  }

  /** Bytes of the database file and its -wal (0 for ':memory:'). */
  fileBytes(): number {
    if (this.fileId === null) return 0;
    let n = 0;
    for (const f of [this.path, `${this.path}-wal`]) {
      try {
        n += fs.statSync(f).size;
      } catch {
        // not there
      }
    }
    return n;
  }

  // ------------------------------------------------------------------------------------------
  // Events and bounds
  // ------------------------------------------------------------------------------------------

  /** Appends one event. */
  recordEvent(e: Omit<StoreEvent, 'tsMs'> & { tsMs?: number }): void {
    this.db
      .prepare('INSERT INTO events (ts_ms, kind, eap, session, message) VALUES (?, ?, ?, ?, ?)')
      .run(e.tsMs ?? Date.now(), e.kind, e.eap, e.session, e.message.length > 1024 ? `${e.message.slice(0, 1021)}...` : e.message);
  }

  /** Events from `sinceMs` on, oldest first (of one kind when given), at most `limit`. */
  events(options: { sinceMs?: number; kind?: string; limit?: number } = {}): StoreEvent[] {
    const rows = (
      options.kind === undefined
        ? this.db.prepare('SELECT * FROM events WHERE ts_ms >= ? ORDER BY rowid LIMIT ?').all(options.sinceMs ?? 0, options.limit ?? 10_000)
        : this.db
            .prepare('SELECT * FROM events WHERE ts_ms >= ? AND kind = ? ORDER BY rowid LIMIT ?')
            .all(options.sinceMs ?? 0, options.kind, options.limit ?? 10_000)
    ) as { ts_ms: number; kind: string; eap: number | null; session: string | null; message: string }[];
    return rows.map((r) => ({ tsMs: r.ts_ms, kind: r.kind, eap: r.eap, session: r.session, message: r.message }));
  }

  /** Bytes of experience frames held. */
  get experienceBytes(): number {
    return this.experienceBytesHeld;
  }

  /**
   * Enforces `limits`: the oldest experience batches beyond the byte or age limit, metric points
   * and events beyond their row or age limits are deleted, and the freed pages returned to the
   * file system (incremental vacuum). Cheap when nothing is over (a few indexed reads).
   */
  prune(nowMs = Date.now()): PruneResult {
    const L = this.limits;
    const out: PruneResult = { experience: 0, metrics: 0, events: 0, models: 0, placements: 0 };
    this.db.transaction(() => {
      if (L.experienceMaxAgeMs > 0 && Number.isFinite(L.experienceMaxAgeMs)) {
        out.experience += this.deleteExperience('ts_ms < ?', nowMs - L.experienceMaxAgeMs);
      }
      if (L.experienceMaxBytes > 0 && Number.isFinite(L.experienceMaxBytes) && this.experienceBytesHeld > L.experienceMaxBytes) {
        // oldest first, until what is left fits
        const rows = this.db.prepare('SELECT seq, length(frame) AS b FROM experience ORDER BY seq').iterate() as Iterable<{
          seq: number;
          b: number;
        }>;
        let excess = this.experienceBytesHeld - L.experienceMaxBytes;
        let lastSeq = -1;
        for (const r of rows) {
          if (excess <= 0) break;
          excess -= r.b;
          lastSeq = r.seq;
        }
        if (lastSeq >= 0) out.experience += this.deleteExperience('seq <= ?', lastSeq);
      }
      out.metrics += this.pruneRows('metrics', L.metricsMaxRows, L.metricsMaxAgeMs, nowMs);
      out.events += this.pruneRows('events', L.eventsMaxRows, L.eventsMaxAgeMs, nowMs);
      // the newest versions; a running canary's good version too (its rollback restores it)
      const good = this.canaryState()?.good ?? -1;
      out.models += this.pruneVersions('models', L.modelsMaxRows, good);
      out.placements += this.pruneVersions('placements', L.placementsMaxRows, -1);
    })();
    if (out.experience + out.metrics + out.events + out.models + out.placements > 0) this.db.pragma('incremental_vacuum');
    return out;
  }

  /** Versions below the newest `keep` go, except `spare`. */
  private pruneVersions(table: 'models' | 'placements', keep: number, spare: number): number {
    if (!(keep > 0 && Number.isFinite(keep))) return 0;
    const cut = this.db.prepare(`SELECT version FROM ${table} ORDER BY version DESC LIMIT 1 OFFSET ?`).get(keep - 1) as
      { version: number } | undefined;
    if (!cut) return 0;
    return this.db.prepare(`DELETE FROM ${table} WHERE version < ? AND version <> ?`).run(cut.version, spare).changes;
  }

  private deleteExperience(where: string, arg: number): number {
    const freed = this.db.prepare(`SELECT COUNT(*) AS n, COALESCE(SUM(length(frame)), 0) AS b FROM experience WHERE ${where}`).get(arg) as {
      n: number;
      b: number;
    };
    if (freed.n === 0) return 0;
    this.db.prepare(`DELETE FROM experience WHERE ${where}`).run(arg);
    this.experienceBytesHeld -= freed.b;
    return freed.n;
  }

  /** Rows beyond `maxRows` (oldest, by rowid) and older than `maxAgeMs` go. */
  private pruneRows(table: 'metrics' | 'events', maxRows: number, maxAgeMs: number, nowMs: number): number {
    let n = 0;
    if (maxAgeMs > 0 && Number.isFinite(maxAgeMs)) {
      // rows are appended in time order: the old ones are a rowid prefix
      const cut = this.db
        .prepare(`SELECT MAX(rowid) AS r FROM (SELECT rowid FROM ${table} WHERE ts_ms < ? ORDER BY rowid LIMIT 1000000)`)
        .get(nowMs - maxAgeMs) as { r: number | null };
      if (cut.r !== null) n += this.db.prepare(`DELETE FROM ${table} WHERE rowid <= ?`).run(cut.r).changes;
    }
    if (maxRows > 0 && Number.isFinite(maxRows)) {
      const span = this.db.prepare(`SELECT MIN(rowid) AS lo, MAX(rowid) AS hi FROM ${table}`).get() as {
        lo: number | null;
        hi: number | null;
      };
      if (span.lo !== null && span.hi !== null && span.hi - span.lo + 1 > maxRows) {
        n += this.db.prepare(`DELETE FROM ${table} WHERE rowid <= ?`).run(span.hi - maxRows).changes;
      }
    }
    return n;
  }

  /**
   * Binds the store to one cluster shape: the first start records `key` (the scenario's name and
   * its services x nodes); a later start with another key gets the recorded one back (the caller
   * refuses it: the stored placement, overrides and holds are of another cluster). null: bound now
   * or already to this key.
   */
  bindScenario(key: string): string | null {
    const had = this.meta('scenario');
    if (had !== null && had !== key) return had;
    if (had === null) this.db.prepare(`INSERT INTO meta (key, value) VALUES ('scenario', ?)`).run(key);
    return null;
  }

  /** The admin's overrides and holds (orchestrator/admin.ts), as JSON text; null when none were ever set. */
  adminState(): string | null {
    return this.meta('admin');
  }

  putAdminState(json: string): void {
    this.putMeta('admin', json);
  }

  /** The admin's freeze of online learning (orchestrator/weights-admin.ts), as JSON text; null when learning is not frozen. */
  learningFrozen(): string | null {
    return this.meta('learning-frozen');
  }

  putLearningFrozen(json: string | null): void {
    this.putMeta('learning-frozen', json);
  }

  // ------------------------------------------------------------------------------------------
  // Safe learning (issue 17): rejected versions, the running canary
  // ------------------------------------------------------------------------------------------

  /** Keeps a rejected version with its reason (the newest REJECTED_MODELS_KEPT rows are kept). */
  putRejectedModel(
    r: { version: number; basedOn: number | null; source: RejectionSource; reason: string; body: WeightsBody | null },
    nowMs = Date.now(),
  ): void {
    this.db.transaction(() => {
      this.db
        .prepare('INSERT INTO rejected_models (ts_ms, version, based_on, source, reason, weights) VALUES (?, ?, ?, ?, ?, ?)')
        .run(nowMs, r.version, r.basedOn, r.source, r.reason.slice(0, 2048), r.body ? weightsToBytes(r.body, { trusted: true }) : null);
      this.db.prepare('DELETE FROM rejected_models WHERE rowid <= (SELECT MAX(rowid) FROM rejected_models) - ?').run(REJECTED_MODELS_KEPT);
    })();
  }

  /** Rejected versions, newest first. */
  rejectedModels(): RejectedModelRecord[] {
    return (
      this.db
        .prepare('SELECT ts_ms, version, based_on, source, reason, weights IS NOT NULL AS w FROM rejected_models ORDER BY rowid DESC')
        .all() as {
        ts_ms: number;
        version: number;
        based_on: number | null;
        source: RejectionSource;
        reason: string;
        w: number;
      }[]
    ).map((r) => ({ tsMs: r.ts_ms, version: r.version, basedOn: r.based_on, source: r.source, reason: r.reason, hasWeights: r.w === 1 }));
  }

  /** The weights of the newest rejected row of `version` (a canary's from `models`), or null. */
  rejectedWeights(version: number): WeightsBody | null {
    const row = this.db
      .prepare('SELECT source, weights FROM rejected_models WHERE version = ? ORDER BY rowid DESC LIMIT 1')
      .get(version) as { source: string; weights: Buffer | null } | undefined;
    if (!row) return null;
    return row.weights ? weightsFromBytes(row.weights) : this.model(version);
  }

  /** The canary running now (orchestrator/canary.ts), kept so that a restart rolls it back; null: none. */
  canaryState(): { version: number; good: number | null; eaps: EapId[]; startedMs: number } | null {
    const text = this.meta('canary');
    if (text === null || text === '') return null;
    try {
      return JSON.parse(text) as { version: number; good: number | null; eaps: EapId[]; startedMs: number };
    } catch {
      return null;
    }
  }

  putCanaryState(s: { version: number; good: number | null; eaps: EapId[]; startedMs: number } | null): void {
    this.putMeta('canary', s === null ? '' : JSON.stringify(s));
  }

  private meta(key: string): string | null {
    const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value ?? null;
  }

  /** Sets meta `key` (null: deletes it). */
  private putMeta(key: string, value: string | null): void {
    if (value === null) this.db.prepare('DELETE FROM meta WHERE key = ?').run(key);
    else
      this.db.prepare('INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value').run(key, value);
  }

  // ------------------------------------------------------------------------------------------
  // Agents
  // ------------------------------------------------------------------------------------------

  /** Records an accepted `hello` (connected = true). */
  agentConnected(
    eapId: EapId,
    sessionId: string,
    hello: { agentVersion: string; weightVersion: number | null; placementVersion: number | null },
    nowMs = Date.now(),
  ): void {
    this.db
      .prepare(
        `INSERT INTO agents (eap_id, session_id, agent_version, weight_version, placement_version, connected, last_seen_ms)
         VALUES (?, ?, ?, ?, ?, 1, ?)
         ON CONFLICT (eap_id) DO UPDATE SET session_id = excluded.session_id, agent_version = excluded.agent_version,
           weight_version = excluded.weight_version, placement_version = excluded.placement_version,
           connected = 1, last_seen_ms = excluded.last_seen_ms`,
      )
      .run(eapId, sessionId, hello.agentVersion, hello.weightVersion, hello.placementVersion, nowMs);
  }

  /** The agent's session ended; only if `sessionId` is still its current one (a replaced session may close late). */
  agentDisconnected(eapId: EapId, sessionId: string, nowMs = Date.now()): void {
    this.db.prepare('UPDATE agents SET connected = 0, last_seen_ms = ? WHERE eap_id = ? AND session_id = ?').run(nowMs, eapId, sessionId);
  }

  /** The agent acknowledged applying a weights or placement version. */
  agentApplied(eapId: EapId, kind: 'weights' | 'placement', version: number, nowMs = Date.now()): void {
    const column = kind === 'weights' ? 'weight_version' : 'placement_version';
    this.db.prepare(`UPDATE agents SET ${column} = ?, last_seen_ms = ? WHERE eap_id = ?`).run(version, nowMs, eapId);
  }

  agent(eapId: EapId): AgentRecord | null {
    const row = this.db.prepare('SELECT * FROM agents WHERE eap_id = ?').get(eapId) as AgentRow | undefined;
    return row ? agentFromRow(row) : null;
  }

  agents(): AgentRecord[] {
    return (this.db.prepare('SELECT * FROM agents ORDER BY eap_id').all() as AgentRow[]).map(agentFromRow);
  }

  /** At startup: nobody is connected to a process that has just started. */
  markAllDisconnected(): void {
    this.db.prepare('UPDATE agents SET connected = 0').run();
  }

  // ------------------------------------------------------------------------------------------
  // Models
  // ------------------------------------------------------------------------------------------

  /** Stores a model version. Throws TypeError if the version is not above the latest stored one. */
  putModel(body: WeightsBody, nowMs = Date.now()): void {
    const latest = this.latestModelVersion();
    if (latest !== null && body.version <= latest) {
      throw new TypeError(`Store.putModel: version ${body.version} is not above the latest stored ${latest}`);
    }
    this.db
      .prepare('INSERT INTO models (version, checksum, created_ms, weights) VALUES (?, ?, ?, ?)')
      // trusted: the registry's body (values checked by the learner, checksum by packWeights);
      // model() verifies it all on the way back (weightsFromBytes)
      .run(body.version, body.checksum >>> 0, nowMs, weightsToBytes(body, { trusted: true }));
  }

  latestModelVersion(): number | null {
    const row = this.db.prepare('SELECT MAX(version) AS v FROM models').get() as { v: number | null };
    return row.v;
  }

  /** The weights of `version`, or null. A corrupt BLOB throws the ProtocolError of weightsFromBytes. */
  model(version: number): WeightsBody | null {
    const row = this.db.prepare('SELECT weights FROM models WHERE version = ?').get(version) as { weights: Buffer } | undefined;
    return row ? weightsFromBytes(row.weights) : null;
  }

  latestModel(): WeightsBody | null {
    const v = this.latestModelVersion();
    return v === null ? null : this.model(v);
  }

  models(): ModelRecord[] {
    return (
      this.db.prepare('SELECT version, checksum, created_ms, length(weights) AS bytes FROM models ORDER BY version').all() as {
        version: number;
        checksum: number;
        created_ms: number;
        bytes: number;
      }[]
    ).map((r) => ({ version: r.version, checksum: r.checksum, createdMs: r.created_ms, bytes: r.bytes }));
  }

  // ------------------------------------------------------------------------------------------
  // Placements
  // ------------------------------------------------------------------------------------------

  /** Stores a placement version. Throws TypeError if the version is not above the latest stored one. */
  putPlacement(body: PlacementBody, nowMs = Date.now()): void {
    const latest = this.latestPlacementVersion();
    if (latest !== null && body.version <= latest) {
      throw new TypeError(`Store.putPlacement: version ${body.version} is not above the latest stored ${latest}`);
    }
    if (body.replicas.length !== body.numServices * body.numNodes) {
      throw new TypeError(
        `Store.putPlacement: replicas has ${body.replicas.length} entries, expected ${body.numServices} x ${body.numNodes}`,
      );
    }
    const replicas = Buffer.from(body.replicas.buffer, body.replicas.byteOffset, body.replicas.byteLength);
    this.db
      .prepare('INSERT INTO placements (version, frame, num_services, num_nodes, replicas, created_ms, actor) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(body.version, body.frame, body.numServices, body.numNodes, replicas, nowMs, body.actor ?? null);
  }

  latestPlacementVersion(): number | null {
    const row = this.db.prepare('SELECT MAX(version) AS v FROM placements').get() as { v: number | null };
    return row.v;
  }

  placement(version: number): PlacementBody | null {
    const row = this.db.prepare('SELECT * FROM placements WHERE version = ?').get(version) as PlacementRow | undefined;
    return row ? placementBody(row) : null;
  }

  /** Every stored placement, oldest version first (`kais up` compares them with the simulator's). */
  placements(): PlacementBody[] {
    return (this.db.prepare('SELECT * FROM placements ORDER BY version').all() as PlacementRow[]).map(placementBody);
  }

  latestPlacement(): PlacementBody | null {
    const v = this.latestPlacementVersion();
    return v === null ? null : this.placement(v);
  }

  // ------------------------------------------------------------------------------------------
  // Metrics
  // ------------------------------------------------------------------------------------------

  /** Appends metric points (one transaction). Names use prefixes: `hub/`, `agent/`, `losses/`. */
  recordMetrics(points: readonly MetricPoint[]): void {
    const insert = this.db.prepare('INSERT INTO metrics (ts_ms, name, eap, value) VALUES (?, ?, ?, ?)');
    this.db.transaction(() => {
      for (const p of points) {
        if (!Number.isFinite(p.value)) throw new TypeError(`Store.recordMetrics: ${p.name} is ${p.value}`);
        insert.run(p.tsMs, p.name, p.eap, p.value);
      }
    })();
  }

  /** Points of one metric, oldest first, from `sinceMs` on. */
  metrics(name: string, sinceMs = 0): MetricPoint[] {
    return (
      this.db
        .prepare('SELECT ts_ms, name, eap, value FROM metrics WHERE name = ? AND ts_ms >= ? ORDER BY ts_ms, rowid')
        .all(name, sinceMs) as { ts_ms: number; name: string; eap: number | null; value: number }[]
    ).map((r) => ({ tsMs: r.ts_ms, name: r.name, eap: r.eap, value: r.value }));
  }

  // ------------------------------------------------------------------------------------------
  // Online learner state
  // ------------------------------------------------------------------------------------------

  /**
   * Saves the learner's state in one transaction: the next experience seq it has not consumed and
   * its critic weights (a `weightsToBytes` BLOB, so a half-written state cannot exist).
   */
  putLearnerState(state: { cursor: number; updates: number; critic: WeightsBody }): void {
    const put = this.db.prepare('INSERT OR REPLACE INTO learner (key, value) VALUES (?, ?)');
    this.db.transaction(() => {
      put.run('cursor', Buffer.from(String(state.cursor)));
      put.run('updates', Buffer.from(String(state.updates)));
      put.run('critic', weightsToBytes(state.critic));
    })();
  }

  /** The learner's saved state, or null before its first save. */
  learnerState(): { cursor: number; updates: number; critic: WeightsBody } | null {
    const rows = this.db.prepare('SELECT key, value FROM learner').all() as { key: string; value: Buffer }[];
    const m = new Map(rows.map((r) => [r.key, r.value]));
    const cursor = m.get('cursor');
    const updates = m.get('updates');
    const critic = m.get('critic');
    if (!cursor || !updates || !critic) return null;
    return { cursor: Number(cursor.toString()), updates: Number(updates.toString()), critic: weightsFromBytes(critic) };
  }

  /** Saves (replacing) the fitted detector of `key`; weights in VgruDetector.getWeights order. */
  putDetector(d: StoredDetector, nowMs = Date.now()): void {
    const body = packWeights(
      d.weights.map((data) => ({ shape: [data.length], data })),
      1,
    );
    this.db
      .prepare('INSERT OR REPLACE INTO detectors (key, dims, steps, fit_windows, created_ms, weights) VALUES (?, ?, ?, ?, ?, ?)')
      .run(d.key, d.dims, d.steps, d.fitWindows, nowMs, weightsToBytes(body));
  }

  /** Every stored detector, by key. */
  detectors(): StoredDetector[] {
    const rows = this.db.prepare('SELECT key, dims, steps, fit_windows, weights FROM detectors ORDER BY key').all() as {
      key: string;
      dims: number;
      steps: number;
      fit_windows: number;
      weights: Buffer;
    }[];
    return rows.map((r) => ({
      key: r.key,
      dims: r.dims,
      steps: r.steps,
      fitWindows: r.fit_windows,
      weights: weightsFromBytes(r.weights).tensors,
    }));
  }

  /** Seq the next appended experience batch gets (= number of batches ever appended). */
  get experienceSeqEnd(): number {
    return this.nextExperienceSeq;
  }

  // ------------------------------------------------------------------------------------------
  // Experience ring
  // ------------------------------------------------------------------------------------------

  /** Appends one batch; once `experienceCapacity` batches are held, the oldest is overwritten. */
  appendExperience(body: ExperienceBody, nowMs = Date.now()): number {
    const seq = this.nextExperienceSeq;
    const frame = this.codec.encode(makeFrame('experience', 0, body, nowMs));
    const slot = seq % this.experienceCapacity;
    const replaced = this.db.prepare('SELECT length(frame) AS b FROM experience WHERE slot = ?').get(slot) as { b: number } | undefined;
    this.db
      .prepare('INSERT OR REPLACE INTO experience (slot, seq, eap, ts_ms, transitions, frame) VALUES (?, ?, ?, ?, ?, ?)')
      .run(slot, seq, body.eap, nowMs, body.transitions.length, frame);
    this.experienceBytesHeld += frame.length - (replaced?.b ?? 0);
    this.nextExperienceSeq = seq + 1;
    return seq;
  }

  /** Number of batches held (<= experienceCapacity). */
  experienceCount(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM experience').get() as { n: number }).n;
  }

  /** Batches with seq >= `fromSeq`, oldest first, at most `limit`. */
  readExperience(fromSeq = 0, limit = this.experienceCapacity): ExperienceRecord[] {
    const rows = this.db.prepare('SELECT seq, ts_ms, frame FROM experience WHERE seq >= ? ORDER BY seq LIMIT ?').all(fromSeq, limit) as {
      seq: number;
      ts_ms: number;
      frame: Buffer;
    }[];
    const out: ExperienceRecord[] = [];
    for (const r of rows) {
      const decoded = this.codec.decode(r.frame);
      if (!decoded.ok || decoded.frame.type !== 'experience') {
        throw new TypeError(`Store: experience batch ${r.seq} in ${this.path} is corrupt`);
      }
      out.push({ seq: r.seq, tsMs: r.ts_ms, body: decoded.frame.body });
    }
    return out;
  }
}

/** A fresh epoch id: creation time and 48 random bits, e.g. `mf3k2x1a-9c0e4b7d21aa`. */
function newEpoch(): string {
  return `${Date.now().toString(36)}-${randomBytes(6).toString('hex')}`;
}

function fileIdentity(path: string): string | null {
  if (path === ':memory:' || path === '') return null;
  try {
    const st = fs.statSync(path);
    return `${st.dev}:${st.ino}`;
  } catch {
    return null;
  }
}

function agentFromRow(r: AgentRow): AgentRecord {
  return {
    eapId: r.eap_id,
    sessionId: r.session_id,
    agentVersion: r.agent_version,
    weightVersion: r.weight_version,
    placementVersion: r.placement_version,
    connected: r.connected === 1,
    lastSeenMs: r.last_seen_ms,
  };
}

interface PlacementRow {
  version: number;
  frame: number;
  num_services: number;
  num_nodes: number;
  replicas: Buffer;
  /** Absent in a read-only file from before the column; NULL: the placement named no actor. */
  actor?: string | null;
}

function placementBody(row: PlacementRow): PlacementBody {
  // Copied into a fresh buffer: Int32Array needs 4-byte alignment of the byte offset.
  const bytes = new Uint8Array(row.replicas.byteLength);
  bytes.set(row.replicas);
  return {
    version: row.version,
    frame: row.frame,
    numServices: row.num_services,
    numNodes: row.num_nodes,
    replicas: new Int32Array(bytes.buffer),
    ...(row.actor === 'main' || row.actor === 'light' ? { actor: row.actor } : {}),
  };
}
