/**
 * On-policy rollout storage for cMMAC: the decisions of a stretch of slots (obs, mask, action,
 * log pi at acting time, the slot they belong to), and per decision slot the global state s_t and
 * the team reward U_t = sum_b u_b. `finish(state)` appends the bootstrap state s_S.
 *
 * It satisfies the agent's DecisionRecorder shape structurally (critic/ does not import agent/).
 */

export class RolloutBuffer {
  n = 0;
  numSlots = 0;
  obs: Float32Array;
  mask: Uint8Array;
  action: Int32Array;
  logProb: Float32Array;
  /** decision -> index of its slot in states/rewards */
  slot: Int32Array;
  eap: Int32Array;
  /** decision -> id of the request it dispatched (-1 unless tagged, see tagRequests) */
  requestId: Int32Array;
  /** [(numSlots + 1) x stateDim] once finished */
  states: Float32Array;
  rewards: Float32Array;
  private finished = false;

  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    readonly stateDim: number,
    capacity = 1024,
  ) {
    this.obs = new Float32Array(capacity * obsDim);
    this.mask = new Uint8Array(capacity * numActions);
    this.action = new Int32Array(capacity);
    this.logProb = new Float32Array(capacity);
    this.slot = new Int32Array(capacity);
    this.eap = new Int32Array(capacity);
    this.requestId = new Int32Array(capacity).fill(-1);
    this.states = new Float32Array(128 * stateDim);
    this.rewards = new Float32Array(128);
  }

  /** Start decision slot k: its state s_k (copied). Decisions recorded next belong to it. */
  beginSlot(state: Float32Array): void {
    if (this.finished) throw new Error('RolloutBuffer: beginSlot() after finish(); call clear()');
    this.pushState(state);
    if (this.numSlots >= this.rewards.length) this.rewards = grow(this.rewards, 2 * this.rewards.length);
    this.rewards[this.numSlots] = 0;
    this.numSlots++;
  }

  /** Adds reward to the current slot's U (rewards of the steps until the next decision slot). */
  addReward(u: number): void {
    if (this.numSlots === 0) return; // reward before any decision: nothing to credit
    this.rewards[this.numSlots - 1] += u;
  }

  record(obs: Float32Array, mask: Uint8Array, action: number, logProb: number, eap: number): void {
    if (this.numSlots === 0) throw new Error('RolloutBuffer: record() before beginSlot()');
    if (this.n >= this.action.length) this.resize(2 * this.action.length);
    const i = this.n++;
    this.obs.set(obs.subarray(0, this.obsDim), i * this.obsDim);
    this.mask.set(mask.subarray(0, this.numActions), i * this.numActions);
    this.action[i] = action;
    this.logProb[i] = logProb;
    this.slot[i] = this.numSlots - 1;
    this.eap[i] = eap;
    this.requestId[i] = -1;
  }

  /** Tags the last ids.length decisions (in record order) with their request ids. */
  tagRequests(ids: readonly number[]): void {
    const start = this.n - ids.length;
    if (start < 0) throw new Error('RolloutBuffer.tagRequests: more ids than decisions');
    for (let j = 0; j < ids.length; j++) this.requestId[start + j] = ids[j];
  }

  /** Appends the bootstrap state s_S after the last slot. */
  finish(state: Float32Array): void {
    this.pushState(state);
    this.finished = true;
  }

  get isFinished(): boolean {
    return this.finished;
  }

  clear(): void {
    this.n = 0;
    this.numSlots = 0;
    this.finished = false;
  }

  private pushState(state: Float32Array): void {
    const need = (this.numSlots + 1) * this.stateDim;
    if (need > this.states.length) this.states = grow(this.states, 2 * need);
    this.states.set(state.subarray(0, this.stateDim), this.numSlots * this.stateDim);
  }

  private resize(cap: number): void {
    this.obs = grow(this.obs, cap * this.obsDim);
    this.mask = grow(this.mask, cap * this.numActions);
    this.action = grow(this.action, cap);
    this.logProb = grow(this.logProb, cap);
    this.slot = grow(this.slot, cap);
    this.eap = grow(this.eap, cap);
    this.requestId = grow(this.requestId, cap);
  }
}

function grow<T extends Float32Array | Int32Array | Uint8Array>(a: T, len: number): T {
  const b = new (a.constructor as new (n: number) => T)(len);
  b.set(a);
  return b;
}
