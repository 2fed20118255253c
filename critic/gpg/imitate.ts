/**
 * Imitation data for GPG: a teacher's choices on greedy GPG's decisions, as JSON lines. The teacher
 * (scripts/gpg-lookahead.ts, a search by simulation) keeps, drops or changes the orders of greedy
 * GPG's decision; the student learns to pick the same nodes and, on each, the teacher's action (the
 * no-op where it dropped the order) (GpgLearner.imitate in update.ts). Pure: the scripts read and
 * write the files.
 */
import type { ScaleOp } from '../../shared/domain';
import { actionCount, type GraphState } from './graph';
import type { GpgDecision } from './policy';

/** One decision as a JSON-safe record: the graph, greedy's nodes and actions, and the teacher's action per node. */
export interface ImitationRecord {
  state: {
    numNodes: number;
    numEaps: number;
    numServices: number;
    nodeEap: number[];
    x: number[];
    eapX: number[];
    globalX: number[];
    actionMask: number[];
    nodeMask: number[];
  };
  nodes: number[];
  /** Greedy's action per picked node (0 = no-op). */
  actions: number[];
  /** The teacher's action per picked node (0: it dropped the order). */
  teacher: number[];
}

/**
 * The record of greedy's decision `d` where the teacher ordered `chosen` instead (orders on d's nodes
 * only: the search changes actions, never nodes).
 */
export function encodeDecision(d: GpgDecision, chosen: readonly ScaleOp[]): ImitationRecord {
  const s = d.state;
  const W = s.spec.numServices;
  const byNode = new Map(chosen.map((o) => [o.node, o.delta > 0 ? 1 + o.service : 1 + W + o.service]));
  if (chosen.some((o) => !d.nodes.includes(o.node))) throw new TypeError('encodeDecision: an order on a node the decision did not pick');
  return {
    state: {
      numNodes: s.spec.numNodes,
      numEaps: s.spec.numEaps,
      numServices: s.spec.numServices,
      nodeEap: Array.from(s.spec.nodeEap),
      x: Array.from(s.x),
      eapX: Array.from(s.eapX),
      globalX: Array.from(s.globalX),
      actionMask: Array.from(s.actionMask),
      nodeMask: Array.from(s.nodeMask),
    },
    nodes: [...d.nodes],
    actions: [...d.actions],
    teacher: d.nodes.map((n) => byNode.get(n) ?? 0),
  };
}

/** The teacher's decision of a record: greedy's nodes and the teacher's actions. A TypeError naming the problem when the record is not one. */
export function teacherDecision(r: ImitationRecord): GpgDecision {
  const s = r?.state;
  const ok =
    s &&
    [s.numNodes, s.numEaps, s.numServices].every((v) => Number.isInteger(v) && v > 0) &&
    [s.nodeEap, s.x, s.eapX, s.globalX, s.actionMask, s.nodeMask].every(Array.isArray) &&
    Array.isArray(r.nodes) &&
    Array.isArray(r.actions) &&
    Array.isArray(r.teacher) &&
    r.nodes.length === r.actions.length &&
    r.nodes.length === r.teacher.length &&
    s.nodeMask.length === s.numNodes &&
    s.actionMask.length === s.numNodes * actionCount(s.numServices) &&
    r.teacher.every((a, h) => Number.isInteger(a) && s.actionMask[r.nodes[h] * actionCount(s.numServices) + a] === 1);
  if (!ok) throw new TypeError('not an imitation record (state, nodes, actions and teacher actions of one length, each valid)');
  const state: GraphState = {
    spec: { numNodes: s.numNodes, numEaps: s.numEaps, numServices: s.numServices, nodeEap: Int32Array.from(s.nodeEap) },
    x: Float32Array.from(s.x),
    eapX: Float32Array.from(s.eapX),
    globalX: Float32Array.from(s.globalX),
    actionMask: Uint8Array.from(s.actionMask),
    nodeMask: Uint8Array.from(s.nodeMask),
  };
  return { state, nodes: [...r.nodes], actions: [...r.teacher] };
}
