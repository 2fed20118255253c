/**
 * The admin's hand on the actor weights (`kais weights`, the admin API's /v1/weights/*): what an
 * operator does when a version the agents run looks wrong, or when online learning should stop
 * for a while, without restarting anything.
 *
 * - **Rollback** (`POST /v1/weights/rollback {to?, reason, by?}`): every agent goes back to the
 *   weights of an earlier stored version, as a new version (agents apply only versions above the
 *   one they hold, and a restart serves the latest stored one, as the canary's rollback does).
 *   - While a canary runs, it is the canary's version that is rolled back, now, to the canary's good
 *     version (a version queued behind it is dropped with it); `to` may only name that version.
 *   - Otherwise the current version is rolled back to `to`, by default the newest stored version
 *     below it that was never rejected (by the gate, a canary or an admin). A version waiting for
 *     its canary's baseline is dropped: it was learned from the version rolled back.
 *   - The version rolled back is kept in the store's rejected versions (source `admin`, with who
 *     and why), the learner goes back to the restored weights, and an `admin-rollback` event says
 *     which version went, which came back and as what.
 * - **Freeze** (`POST /v1/weights/freeze {reason, by?}`) and **unfreeze**: the online learner reads
 *   experience but runs no update and publishes nothing while frozen; kept in the store, so a
 *   restarted orchestrator stays frozen. Unfrozen, it learns from the current version's decisions
 *   on. Events `admin-freeze`, `admin-unfreeze`.
 *
 * A store that cannot be written refuses the change (503, nothing changed): a rollback the next
 * restart would undo, or a freeze it would forget, is worse than one refused.
 */
import type { WeightsBody } from '../shared/protocol/envelope';

/** Who froze online learning, why and since when. */
export interface LearningFrozen {
  by: string;
  reason: string;
  sinceMs: number;
}

export interface WeightsAdminDeps {
  store: {
    latestModelVersion(): number | null;
    model(version: number): WeightsBody | null;
    models(): { version: number }[];
    rejectedModels(): { version: number }[];
    putRejectedModel(r: { version: number; basedOn: number | null; source: 'admin'; reason: string; body: null }): void;
    learningFrozen(): string | null;
    putLearningFrozen(json: string | null): void;
  };
  registry: { restore(good: number): WeightsBody };
  canary: {
    readonly running: { version: number; good: number | null } | null;
    /** Rolls the canary back now (its own `admin-rollback` event, whose message it returns); null: none runs. */
    rollBackNow(reason: string): { restored: WeightsBody; message: string } | null;
    dropWaiting(): boolean;
    adoptGood(version: number): void;
  } | null;
  learner: { freeze(): void; unfreeze(current: number | null): void; reload(restored: number): void } | null;
  event(kind: string, message: string): void;
  log(line: string): void;
  now?: () => number;
}

/** An answer of the admin API: status and JSON body (the API adds the orchestrator's status to a success). */
export interface WeightsReply {
  status: number;
  body: Record<string, unknown>;
}

const refuse = (status: number, reason: string): WeightsReply => ({ status, body: { reason } });

export class WeightsAdmin {
  private frozenState: LearningFrozen | null = null;

  constructor(private readonly d: WeightsAdminDeps) {
    const text = d.store.learningFrozen();
    if (text !== null) {
      const f = readFrozen(text);
      if (f && d.learner) {
        this.frozenState = f;
        d.learner.freeze();
        d.log(
          `learner: frozen by ${f.by} since ${new Date(f.sinceMs).toISOString()}: ${f.reason} (kais weights --unfreeze to learn again)`,
        );
      } else if (!f) d.log('the stored learning freeze is unreadable: learning is not frozen');
    }
  }

  /** Who froze learning (null: not frozen). */
  get frozen(): LearningFrozen | null {
    return this.frozenState;
  }

  rollback(to: number | null, reason: string, by: string): WeightsReply {
    const { store, canary } = this.d;
    const latest = store.latestModelVersion();
    if (latest === null) return refuse(409, 'no weights are stored: nothing to roll back');
    const running = canary?.running ?? null;
    if (running) {
      if (to !== null && to !== running.good)
        return refuse(
          409,
          `to: a canary of v${running.version} runs; a rollback now goes to its good version v${running.good} (give no to, or ${running.good})`,
        );
      const done = this.guarded(() => canary!.rollBackNow(`by ${by}: ${reason}`));
      if (done === null) return notMade(`the rollback of weights v${running.version}`);
      if (done.value === null) return refuse(409, 'the canary ended meanwhile: try again');
      // the canary's event says it all (the windows judged, each eAP's rate): the answer repeats it
      const { restored, message } = done.value;
      return { status: 200, body: { ok: true, event: 'admin-rollback', message, restoredAs: restored.version } };
    }
    const stored = new Set(store.models().map((m) => m.version));
    let target: number;
    if (to !== null) {
      if (to === latest) return refuse(400, `to: v${to} is the current version (name an earlier one)`);
      if (to > latest || !stored.has(to)) return refuse(400, `to: v${to} is not stored (stored: ${ranges([...stored])})`);
      target = to;
    } else {
      const rejected = new Set(store.rejectedModels().map((r) => r.version));
      const earlier = [...stored].filter((v) => v < latest && !rejected.has(v));
      if (earlier.length === 0) return refuse(409, `no version below v${latest} that was never rejected is stored: name one with to`);
      target = Math.max(...earlier);
    }
    // the restored version is stored before it is pushed (registry.restore): a store that refuses it changes nothing
    const done = this.guarded(() => this.d.registry.restore(target));
    if (done === null) return notMade(`the rollback of weights v${latest}`);
    const restored = done.value;
    // pushed by now: a failure to list it among the rejected versions is said, not undone
    const listed = this.guarded(() =>
      store.putRejectedModel({ version: latest, basedOn: target, source: 'admin', reason: `by ${by}: ${reason}`, body: null }),
    );
    const dropped = canary?.dropWaiting() ?? false;
    canary?.adoptGood(restored.version);
    this.d.learner?.reload(restored.version);
    return this.ok(
      'admin-rollback',
      `${by}: weights v${latest} rolled back: every eAP gets v${target}'s weights as v${restored.version}` +
        `${dropped ? ' (the version waiting for its canary is dropped)' : ''}` +
        `${listed === null ? ` (the store could not list v${latest} among the rejected versions)` : ''}: ${reason}`,
      restored.version,
    );
  }

  freeze(reason: string, by: string): WeightsReply {
    if (!this.d.learner) return refuse(409, 'the online learner is off on this orchestrator (config "learner"): nothing to freeze');
    const f = this.frozenState;
    if (f) return refuse(409, `learning is frozen already (by ${f.by} since ${new Date(f.sinceMs).toISOString()}: ${f.reason})`);
    const next: LearningFrozen = { by, reason, sinceMs: (this.d.now ?? Date.now)() };
    if (this.guarded(() => this.d.store.putLearningFrozen(JSON.stringify(next))) === null) return notMade('the freeze of online learning');
    this.frozenState = next;
    this.d.learner.freeze();
    return this.ok('admin-freeze', `${by}: online learning frozen (no update, no new version until unfrozen): ${reason}`, null);
  }

  unfreeze(reason: string, by: string): WeightsReply {
    if (!this.d.learner) return refuse(409, 'the online learner is off on this orchestrator (config "learner"): nothing to unfreeze');
    if (!this.frozenState) return refuse(409, 'learning is not frozen');
    if (this.guarded(() => this.d.store.putLearningFrozen(null)) === null) return notMade('the thaw of online learning');
    this.frozenState = null;
    const current = this.d.store.latestModelVersion();
    this.d.learner.unfreeze(current);
    return this.ok('admin-unfreeze', `${by}: online learning on again, from weights v${current ?? 'none'}'s decisions: ${reason}`, null);
  }

  /** `f`'s value, or null when the store threw (logged). */
  private guarded<T>(f: () => T): { value: T } | null {
    try {
      return { value: f() };
    } catch (e) {
      this.d.log(`weights admin: the store could not be written (${(e as Error).message})`);
      return null;
    }
  }

  private ok(kind: string, message: string, version: number | null): WeightsReply {
    this.d.event(kind, message);
    return { status: 200, body: { ok: true, event: kind, message, ...(version !== null ? { restoredAs: version } : {}) } };
  }
}

/** The store could not keep it: nothing changed (the CLI says so with exit 1, naming the change). */
const notMade = (what: string): WeightsReply => ({
  status: 503,
  body: { ok: false, reason: 'not made: the store cannot be written now (see the orchestrator log); try again', message: what },
});

function readFrozen(text: string): LearningFrozen | null {
  try {
    const f = JSON.parse(text) as Partial<LearningFrozen>;
    if (typeof f.by === 'string' && typeof f.reason === 'string' && typeof f.sinceMs === 'number') return f as LearningFrozen;
  } catch {
    // falls through
  }
  return null;
}

/** 1-3, 5, 7-9: stored versions, compactly. */
function ranges(vs: number[]): string {
  const s = vs.sort((a, b) => a - b);
  const out: string[] = [];
  for (let i = 0; i < s.length;) {
    let j = i;
    while (j + 1 < s.length && s[j + 1] === s[j] + 1) j++;
    out.push(i === j ? `${s[i]}` : `${s[i]}-${s[j]}`);
    i = j + 1;
  }
  return out.join(', ') || 'none';
}
