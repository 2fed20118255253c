/**
 * "Do these weights fit this actor?": the one check, for every place actor weights arrive from
 * outside (a weights frame in the agent, the orchestrator's checkpoint and stored versions, a
 * `kais train` checkpoint or exported actor loaded for `kais eval` / `kais up`). Shapes only, no
 * tfjs, no files. The layout (actor.ts): an MLP chain of [in, out] kernels and [out] biases from the
 * observation to the actions, optionally followed by the shared target scorer's 4 arrays
 * [F, 16], [16], [16, 1], [1] (F = features per target).
 */
import { topologyOf, type Scenario } from '../scenario';
import { observationDim, targetBlockOf, type ObservationShape } from '../spaces';
import { TARGET_SCORER_HIDDEN } from './actor-f32';

/** What fitting weights hold: the MLP's hidden widths and whether the target scorer follows. */
export interface ActorLayout {
  hidden: number[];
  targetScorer: boolean;
}

/** What the actor needs: its input and action counts; `hidden` when the widths in between are fixed too. */
export interface ActorNeeds {
  obsDim: number;
  numActions: number;
  /** the hidden widths required (a learner that keeps training them); absent: any chain. */
  hidden?: readonly number[];
  /** the target scorer's features per target, when it must match (absent: not checked). */
  scorerInputs?: number;
}

/** The layout of weights with these shapes when they fit `needs`, else null (actorHolds says what they are). */
export function actorFit(shapes: readonly (readonly number[])[], needs: ActorNeeds): ActorLayout | null {
  const { obsDim, numActions } = needs;
  const widths: number[] = [];
  let width = obsDim;
  let i = 0;
  // the chain: hidden.length + 1 layers when the widths are fixed, else up to the first layer with
  // numActions outputs (the head)
  const layers = needs.hidden ? needs.hidden.length + 1 : Infinity;
  while (widths.length < layers && (needs.hidden || widths.length === 0 || width !== numActions)) {
    const k = shapes[i];
    const b = shapes[i + 1];
    if (!k || !b || k.length !== 2 || k[0] !== width || b.length !== 1 || b[0] !== k[1]) break;
    width = k[1];
    widths.push(width);
    i += 2;
  }
  if (widths.length === 0 || width !== numActions) return null;
  const hidden = widths.slice(0, -1);
  if (needs.hidden !== undefined && (hidden.length !== needs.hidden.length || hidden.some((h, j) => h !== needs.hidden![j]))) return null;
  const rest = shapes.slice(i);
  if (rest.length === 0) return { hidden, targetScorer: false };
  const H = TARGET_SCORER_HIDDEN;
  const is = (s: readonly number[], ...dims: number[]) => s.length === dims.length && s.every((d, j) => d === dims[j]);
  const scorer =
    rest.length === 4 &&
    rest[0].length === 2 &&
    (needs.scorerInputs === undefined || rest[0][0] === needs.scorerInputs) &&
    rest[0][1] === H &&
    is(rest[1], H) &&
    is(rest[2], H, 1) &&
    is(rest[3], 1);
  return scorer ? { hidden, targetScorer: true } : null;
}

/**
 * What weights of these shapes are, for a message: "an actor with I inputs and A actions" (I the
 * first kernel's inputs, A the outputs where the chain of kernels and biases ends).
 */
export function actorHolds(shapes: readonly (readonly number[])[]): string {
  let width: number | undefined = shapes[0]?.[0];
  let outputs: number | undefined;
  for (let i = 0; i + 1 < shapes.length; i += 2) {
    const [k, b] = [shapes[i], shapes[i + 1]];
    if (k.length !== 2 || k[0] !== width || b.length !== 1 || b[0] !== k[1]) break;
    width = outputs = k[1];
  }
  return `an actor with ${shapes[0]?.[0] ?? '?'} inputs and ${outputs ?? '?'} actions`;
}

/** The cMMAC actor a scenario needs: its observation shape, inputs, actions and target-scorer features. */
export function scenarioActor(scenario: Scenario): ActorNeeds & { shape: ObservationShape } {
  const topo = topologyOf(scenario);
  const shape = { numServices: topo.numServices, numTargets: topo.numNodes + 1, numEaps: topo.numEaps };
  return { shape, obsDim: observationDim(shape), numActions: shape.numTargets, scorerInputs: targetBlockOf(shape).stride };
}
