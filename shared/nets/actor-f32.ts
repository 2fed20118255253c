/**
 * The acting half of the cMMAC actor (actor.ts): sizes, weight layout and `ActorF32`, the forward
 * pass on Float32Arrays. No tfjs import, so the live agent (agent/actor-policy.ts) never loads tfjs
 * (about 40 MB of its RSS, and the start-up time); actor.ts re-exports all of it.
 */
import { MlpF32, softplus, type HeadActivation } from './dense-f32';

export const ACTOR_HIDDEN = [256, 128, 32] as const;

export function actorDims(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[] {
  return [obsDim, ...hidden, numActions];
}

export function actorShapes(obsDim: number, numActions: number, hidden: readonly number[] = ACTOR_HIDDEN): number[][] {
  const dims = actorDims(obsDim, numActions, hidden);
  const s: number[][] = [];
  for (let l = 0; l + 1 < dims.length; l++) s.push([dims[l], dims[l + 1]], [dims[l + 1]]); // mlp.ts mlpShapes
  return s;
}

export type { HeadActivation };

/** Where the per-target feature blocks sit in an observation: offset, F = stride, T = count. */
export interface TargetBlock {
  offset: number;
  stride: number;
  count: number;
}

export const TARGET_SCORER_HIDDEN = 16;

/** Number of weight arrays of an actor (MLP + optional target scorer). */
export function actorArrayCount(hidden: readonly number[] = ACTOR_HIDDEN, targetScorer = false): number {
  return 2 * (hidden.length + 1) + (targetScorer ? 4 : 0);
}

/** The actor's scores q on Float32Arrays (no tfjs): same weights, same outputs as ActorNet.scores. */
export class ActorF32 {
  private readonly mlp: MlpF32;
  private readonly scorer: Float32Array[] | null;
  private readonly hbuf = new Float32Array(TARGET_SCORER_HIDDEN);

  /**
   * With `targetBlock`, arrays may hold the target scorer's 4 arrays after the MLP's (they are
   * used when present); without it they must be the MLP's only.
   */
  constructor(
    readonly obsDim: number,
    readonly numActions: number,
    arrays: readonly Float32Array[],
    hidden: readonly number[] = ACTOR_HIDDEN,
    private readonly head: HeadActivation = 'relu1',
    private readonly targetBlock: TargetBlock | null = null,
  ) {
    const m = actorArrayCount(hidden);
    const withScorer = targetBlock !== null && arrays.length === m + 4;
    this.scorer = withScorer ? (arrays.slice(m) as Float32Array[]) : null;
    if (withScorer && this.scorer![0].length !== targetBlock!.stride * TARGET_SCORER_HIDDEN) {
      throw new TypeError(`ActorF32: target scorer expects ${targetBlock!.stride} features per target`);
    }
    this.mlp = new MlpF32(withScorer ? arrays.slice(0, m) : arrays, actorDims(obsDim, numActions, hidden), withScorer ? 'linear' : head);
  }

  /** Whether the weights include the shared target scorer. */
  get hasTargetScorer(): boolean {
    return this.scorer !== null;
  }

  /** q for `rows` observations ([rows, obsDim]) -> view [rows, A], valid until the next call. */
  scores(obs: Float32Array, rows: number): Float32Array {
    const z = this.mlp.forward(obs, rows);
    if (!this.scorer) return z;
    const { offset, stride, count } = this.targetBlock!;
    const [G1, g1, G2, g2] = this.scorer;
    const H = TARGET_SCORER_HIDDEN;
    const h = this.hbuf;
    const A = this.numActions;
    for (let r = 0; r < rows; r++) {
      for (let t = 0; t < count; t++) {
        const xo = r * this.obsDim + offset + t * stride;
        for (let j = 0; j < H; j++) h[j] = g1[j];
        for (let i = 0; i < stride; i++) {
          const xi = obs[xo + i];
          if (xi === 0) continue;
          for (let j = 0; j < H; j++) h[j] += xi * G1[i * H + j];
        }
        let g = g2[0];
        for (let j = 0; j < H; j++) if (h[j] > 0) g += h[j] * G2[j];
        const v = z[r * A + t] + g;
        z[r * A + t] = this.head === 'softplus1' ? softplus(v) + 1 : (v > 0 ? v : 0) + 1;
      }
    }
    return z;
  }
}
