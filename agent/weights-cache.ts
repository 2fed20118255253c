/**
 * The agent's disk cache of the last weights and placement it applied, so that a restarted agent
 * dispatches with them before (or without) reaching the orchestrator. Weights use the checkpoint
 * buffer of shared/protocol/weights.ts (CRC-32 checked); the placement is a small JSON file.
 * Writes go to a temporary file renamed into place, so a crash never leaves half a file. A corrupt
 * or unreadable cache is ignored (returned as null), never fatal.
 *
 * The cache is trusted input (the agent dispatches with it), so it lives in a private directory:
 * created 0700, and refused (UsageError naming `--cache`) when it is a symlink, not a directory,
 * owned by another user, or writable by group or others (anyone could have planted a file there).
 * The default is per user (`$XDG_CACHE_HOME/kais/agent-<eap>`, else `~/.cache/kais/agent-<eap>`),
 * not a predictable path under /tmp.
 *
 * Each file remembers the orchestrator store epoch of its version (`weights.epoch`, the
 * placement's `epoch` field), so the agent's `hello` can say which epoch its versions belong to
 * and follow a new one (agent/runtime.ts).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { UsageError } from '../shared/errors';
import { writeFileAtomically } from '../shared/atomic-write';
import { EPOCH_PATTERN, type PlacementBody, type WeightsBody } from '../shared/protocol/envelope';
import { weightsFromBytes, weightsToBytes } from '../shared/protocol/weights';

/** The default cache directory of eAP `eap`'s agent: per user, never shared. */
export function defaultCacheDir(eap: number, env: NodeJS.ProcessEnv = process.env): string {
  const xdg = env.XDG_CACHE_HOME;
  const base = xdg && path.isAbsolute(xdg) ? xdg : path.join(os.homedir(), '.cache');
  return path.join(base, 'kais', `agent-${eap}`);
}

/**
 * Creates `dir` (0700, parents as needed) or checks the existing one: a real directory of this
 * user that nobody else can write. Group/other read or search bits are removed. UsageError otherwise.
 */
export function ensurePrivateDir(dir: string): void {
  try {
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (e) {
    throw new UsageError(`--cache: cannot create ${dir} (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
  }
  const st = fs.lstatSync(dir);
  if (st.isSymbolicLink()) throw new UsageError(`--cache: ${dir} is a symbolic link; the cache must be a private directory`);
  if (!st.isDirectory()) throw new UsageError(`--cache: ${dir} is not a directory`);
  const uid = typeof process.getuid === 'function' ? process.getuid() : null;
  if (uid !== null && st.uid !== uid) throw new UsageError(`--cache: ${dir} is owned by uid ${st.uid}, not by this user (${uid})`);
  if ((st.mode & 0o022) !== 0) {
    throw new UsageError(
      `--cache: ${dir} is writable by ${(st.mode & 0o002) !== 0 ? 'everyone' : 'its group'} (mode ${(st.mode & 0o777).toString(8)}); use a private directory (chmod 700)`,
    );
  }
  if ((st.mode & 0o077) !== 0) fs.chmodSync(dir, 0o700);
}

export class StateCache {
  constructor(readonly dir: string) {
    ensurePrivateDir(dir);
  }

  private file(name: string): string {
    return path.join(this.dir, name);
  }

  private write(name: string, bytes: Uint8Array | string): void {
    // a full disk is not kept full by our half-written file (shared/atomic-write.ts removes it)
    writeFileAtomically(this.file(name), bytes, { mode: 0o600 });
  }

  saveWeights(body: WeightsBody): void {
    // the epoch first: a crash between the two leaves old weights with the new epoch, which the
    // orchestrator of that epoch then replaces (its version differs), never the other way round
    if (body.epoch !== undefined) this.write('weights.epoch', body.epoch);
    else fs.rmSync(this.file('weights.epoch'), { force: true });
    try {
      // trusted: a body the runtime took from a verified frame; loadWeights verifies the file again
      this.write('weights.bin', weightsToBytes(body, { trusted: true }));
    } catch (e) {
      // the new epoch must not stay beside the old weights (with equal version numbers the
      // orchestrator would never resend): no cached weights rather than mislabelled ones
      for (const f of ['weights.bin', 'weights.epoch']) fs.rmSync(this.file(f), { force: true, recursive: true });
      throw e;
    }
  }

  /**
   * The cached weights, or null: none cached, or a file that does not verify (`ignored` hears why,
   * so a damaged cache is said, not dropped in silence).
   */
  loadWeights(ignored: (why: string) => void = () => undefined): WeightsBody | null {
    let body: WeightsBody;
    try {
      body = weightsFromBytes(fs.readFileSync(this.file('weights.bin')));
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') ignored(`${this.file('weights.bin')}: ${(e as Error).message.split('\n')[0]}`);
      return null;
    }
    try {
      const epoch = fs.readFileSync(this.file('weights.epoch'), 'utf8').trim();
      if (EPOCH_PATTERN.test(epoch)) body.epoch = epoch;
    } catch {
      // no epoch: weights of an orchestrator before epochs
    }
    return body;
  }

  savePlacement(body: PlacementBody): void {
    this.write('placement.json', JSON.stringify({ ...body, replicas: Array.from(body.replicas) }));
  }

  /** The cached placement, or null: none cached, or a file that does not read as one (`ignored` hears why). */
  loadPlacement(ignored: (why: string) => void = () => undefined): PlacementBody | null {
    const file = this.file('placement.json');
    try {
      const raw = JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, unknown>;
      const { version, frame, numServices, numNodes, replicas, epoch, actor } = raw;
      if (
        !Number.isSafeInteger(version) ||
        !Number.isSafeInteger(frame) ||
        !Number.isSafeInteger(numServices) ||
        !Number.isSafeInteger(numNodes) ||
        !Array.isArray(replicas) ||
        replicas.length !== (numServices as number) * (numNodes as number) ||
        !replicas.every((k) => Number.isInteger(k) && k >= 0)
      ) {
        ignored(`${file}: not a placement (version, frame, numServices x numNodes replicas)`);
        return null;
      }
      const body: PlacementBody = {
        version: version as number,
        frame: frame as number,
        numServices: numServices as number,
        numNodes: numNodes as number,
        replicas: Int32Array.from(replicas as number[]),
      };
      if (typeof epoch === 'string' && EPOCH_PATTERN.test(epoch)) body.epoch = epoch;
      // the actor switch: the frame's actor (anything else read as none: main)
      if (actor === 'main' || actor === 'light') body.actor = actor;
      return body;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') ignored(`${file}: ${(e as Error).message.split('\n')[0]}`);
      return null;
    }
  }
}
