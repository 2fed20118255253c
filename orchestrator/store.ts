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
 * Schema version history: 1 (initial; the `learner` table was added later with CREATE IF NOT
 * EXISTS, so older files gain it on open and stay readable).
 */
import Database from 'better-sqlite3';
import { Codec } from '../shared/protocol/codec';
import type { EapId } from '../shared/domain';
import {
  makeFrame,
  type ExperienceBody,
  type PlacementBody,
  type WeightsBody,
} from '../shared/protocol/envelope';
import { packWeights, weightsFromBytes, weightsToBytes } from '../shared/protocol/weights';

export const STORE_SCHEMA_VERSION = 1;

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
  created_ms INTEGER NOT NULL
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
`;

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
  private readonly db: Database.Database;
  /** Experience batches are stored as encoded `experience` frames: one validated format. */
  private readonly codec = new Codec();
  private nextExperienceSeq: number;

  private constructor(path: string, options: StoreOptions) {
    const requested = options.experienceCapacity ?? 10_000;
    if (!Number.isSafeInteger(requested) || requested <= 0) {
      throw new TypeError(`Store: options.experienceCapacity must be a positive integer, got ${requested}`);
    }
    this.path = path;
    this.db = new Database(path, { readonly: options.readonly ?? false });
    if (!options.readonly) {
      this.db.pragma('journal_mode = WAL');
      // NORMAL in WAL mode: a committed transaction survives a process crash (SIGKILL); only an
      // OS crash or power loss can roll back the last few.
      this.db.pragma('synchronous = NORMAL');
      this.db.exec(SCHEMA);
      this.db
        .prepare(`INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?), ('experience_capacity', ?)`)
        .run(String(STORE_SCHEMA_VERSION), String(requested));
    }
    const schema = this.meta('schema_version');
    if (schema !== String(STORE_SCHEMA_VERSION)) {
      this.db.close();
      throw new TypeError(`Store: ${path} has schema version ${schema}, this build reads ${STORE_SCHEMA_VERSION}`);
    }
    this.experienceCapacity = Number(this.meta('experience_capacity'));
    const last = this.db.prepare('SELECT MAX(seq) AS s FROM experience').get() as { s: number | null };
    this.nextExperienceSeq = last.s === null ? 0 : last.s + 1;
  }

  /** Opens (creating if needed) the store at `path`; ':memory:' for a throwaway one. */
  static open(path: string, options: StoreOptions = {}): Store {
    return new Store(path, options);
  }

  close(): void {
    if (this.db.open) this.db.close();
  }

  private meta(key: string): string | null {
    const row = this.db.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value: string } | undefined;
    return row?.value ?? null;
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
    this.db
      .prepare('UPDATE agents SET connected = 0, last_seen_ms = ? WHERE eap_id = ? AND session_id = ?')
      .run(nowMs, eapId, sessionId);
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
      .run(body.version, body.checksum >>> 0, nowMs, weightsToBytes(body));
  }

  latestModelVersion(): number | null {
    const row = this.db.prepare('SELECT MAX(version) AS v FROM models').get() as { v: number | null };
    return row.v;
  }

  /** The weights of `version`, or null. A corrupt BLOB throws the ProtocolError of weightsFromBytes. */
  model(version: number): WeightsBody | null {
    const row = this.db.prepare('SELECT weights FROM models WHERE version = ?').get(version) as
      | { weights: Buffer }
      | undefined;
    return row ? weightsFromBytes(row.weights) : null;
  }

  latestModel(): WeightsBody | null {
    const v = this.latestModelVersion();
    return v === null ? null : this.model(v);
  }

  models(): ModelRecord[] {
    return (
      this.db
        .prepare('SELECT version, checksum, created_ms, length(weights) AS bytes FROM models ORDER BY version')
        .all() as { version: number; checksum: number; created_ms: number; bytes: number }[]
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
      .prepare(
        'INSERT INTO placements (version, frame, num_services, num_nodes, replicas, created_ms) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(body.version, body.frame, body.numServices, body.numNodes, replicas, nowMs);
  }

  latestPlacementVersion(): number | null {
    const row = this.db.prepare('SELECT MAX(version) AS v FROM placements').get() as { v: number | null };
    return row.v;
  }

  placement(version: number): PlacementBody | null {
    const row = this.db.prepare('SELECT * FROM placements WHERE version = ?').get(version) as
      | { version: number; frame: number; num_services: number; num_nodes: number; replicas: Buffer }
      | undefined;
    if (!row) return null;
    // Copied into a fresh buffer: Int32Array needs 4-byte alignment of the byte offset.
    const bytes = new Uint8Array(row.replicas.byteLength);
    bytes.set(row.replicas);
    return {
      version: row.version,
      frame: row.frame,
      numServices: row.num_services,
      numNodes: row.num_nodes,
      replicas: new Int32Array(bytes.buffer),
    };
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
    const body = packWeights(d.weights.map((data) => ({ shape: [data.length], data })), 1);
    this.db
      .prepare('INSERT OR REPLACE INTO detectors (key, dims, steps, fit_windows, created_ms, weights) VALUES (?, ?, ?, ?, ?, ?)')
      .run(d.key, d.dims, d.steps, d.fitWindows, nowMs, weightsToBytes(body));
  }

  /** Every stored detector, by key. */
  detectors(): StoredDetector[] {
    const rows = this.db.prepare('SELECT key, dims, steps, fit_windows, weights FROM detectors ORDER BY key').all() as { key: string; dims: number; steps: number; fit_windows: number; weights: Buffer }[];
    return rows.map((r) => ({ key: r.key, dims: r.dims, steps: r.steps, fitWindows: r.fit_windows, weights: weightsFromBytes(r.weights).tensors }));
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
    this.db
      .prepare('INSERT OR REPLACE INTO experience (slot, seq, eap, ts_ms, transitions, frame) VALUES (?, ?, ?, ?, ?, ?)')
      .run(seq % this.experienceCapacity, seq, body.eap, nowMs, body.transitions.length, frame);
    this.nextExperienceSeq = seq + 1;
    return seq;
  }

  /** Number of batches held (<= experienceCapacity). */
  experienceCount(): number {
    return (this.db.prepare('SELECT COUNT(*) AS n FROM experience').get() as { n: number }).n;
  }

  /** Batches with seq >= `fromSeq`, oldest first, at most `limit`. */
  readExperience(fromSeq = 0, limit = this.experienceCapacity): ExperienceRecord[] {
    const rows = this.db
      .prepare('SELECT seq, ts_ms, frame FROM experience WHERE seq >= ? ORDER BY seq LIMIT ?')
      .all(fromSeq, limit) as { seq: number; ts_ms: number; frame: Buffer }[];
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
