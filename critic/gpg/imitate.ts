/**
 * Imitation data for GPG: a teacher's choices on greedy GPG's decisions, as JSON lines. The teacher
 * (scripts/gpg-lookahead.ts, a search by simulation) keeps or drops each order of greedy GPG's
 * decision; the student learns to pick the same nodes and, on each, the kept action or the no-op
 * (GpgLearner.imitate in update.ts). Pure: the scripts read and write the files.
 */
import type { ScaleOp } from '../../shared/domain';
import type { GraphState } from './graph';
import type { GpgDecision } from './policy';

/** One decision as a JSON-safe record: the graph, greedy's nodes and actions, and the teacher's keep per node. */
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
  /** Per picked node: the teacher kept its order (a no-op counts as kept). */
  keep: boolean[];
}

/** The record of greedy's decision `d`, whose orders were `greedyOps`, of which the teacher kept `kept`. */
export function encodeDecision(d: GpgDecision, greedyOps: readonly ScaleOp[], kept: readonly ScaleOp[]): ImitationRecord {
  const s = d.state;
  const hasOrder = new Set(greedyOps.map((o) => o.node));
  const keptNodes = new Set(kept.map((o) => o.node));
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
    keep: d.nodes.map((n) => !hasOrder.has(n) || keptNodes.has(n)),
  };
}

/**
 * The teacher's decision of a record: greedy's nodes, with the no-op where the teacher dropped the
 * order. A TypeError naming the problem when the record is not one.
 */
export function teacherDecision(r: ImitationRecord): GpgDecision {
  const s = r?.state;
  const ok =
    s &&
    [s.numNodes, s.numEaps, s.numServices].every((v) => Number.isInteger(v) && v > 0) &&
    [s.nodeEap, s.x, s.eapX, s.globalX, s.actionMask, s.nodeMask].every(Array.isArray) &&
    Array.isArray(r.nodes) &&
    Array.isArray(r.actions) &&
    Array.isArray(r.keep) &&
    r.nodes.length === r.actions.length &&
    r.nodes.length === r.keep.length &&
    s.nodeMask.length === s.numNodes &&
    s.actionMask.length === s.numNodes * (2 * s.numServices + 1);
  if (!ok) throw new TypeError('not an imitation record (state, nodes, actions and keep of one length)');
  const state: GraphState = {
    spec: { numNodes: s.numNodes, numEaps: s.numEaps, numServices: s.numServices, nodeEap: Int32Array.from(s.nodeEap) },
    x: Float32Array.from(s.x),
    eapX: Float32Array.from(s.eapX),
    globalX: Float32Array.from(s.globalX),
    actionMask: Uint8Array.from(s.actionMask),
    nodeMask: Uint8Array.from(s.nodeMask),
  };
  return { state, nodes: [...r.nodes], actions: r.actions.map((a, h) => (r.keep[h] ? a : 0)) };
}
