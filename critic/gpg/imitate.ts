/**
 * Imitation data for GPG: a teacher's choices on greedy GPG's decisions, as JSON lines. The teacher
 * (scripts/gpg-lookahead.ts, a search by simulation) keeps, drops or changes the orders of greedy
 * GPG's decision, or moves one to a node greedy did not pick (CANDIDATES=hpa); the student learns to
 * pick the teacher's nodes and, on each, the teacher's action (the no-op where it dropped the order)
 * (GpgLearner.imitate in update.ts). Pure: the scripts read and write the files.
 */
import type { ScaleOp } from '../../shared/domain';
import { actionCount, opAction, type GraphState } from './graph';
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
  /** The teacher's action per node of `teacherNodes` (0: it dropped the order). */
  teacher: number[];
  /**
   * The teacher's nodes: greedy's, except where it ordered on a node greedy did not pick, which takes
   * the place of one of greedy's nodes it left without an order (the last such). Absent in records
   * written before session 20: greedy's nodes.
   */
  teacherNodes?: number[];
}

/**
 * The record of greedy's decision `d` where the teacher ordered `chosen` instead (at most one order a
 * node). An order on a node d did not pick replaces, from the end, one of d's nodes the teacher left
 * without an order; a TypeError when there is none left (more ordered nodes than d picked).
 */
export function encodeDecision(d: GpgDecision, chosen: readonly ScaleOp[]): ImitationRecord {
  const s = d.state;
  const W = s.spec.numServices;
  const A = actionCount(W);
  const byNode = new Map(chosen.map((o) => [o.node, opAction(o, W)]));
  if (byNode.size !== chosen.length) throw new TypeError('encodeDecision: two orders on one node');
  for (const [n, a] of byNode)
    if (!(Number.isInteger(n) && n >= 0 && n < s.spec.numNodes && s.nodeMask[n] && s.actionMask[n * A + a]))
      throw new TypeError(`encodeDecision: an order on node ${n} that GPG's masks refuse`);
  const nodes = [...d.nodes];
  const free = nodes.map((n, h) => (byNode.has(n) ? -1 : h)).filter((h) => h >= 0);
  for (const o of chosen) {
    if (nodes.includes(o.node)) continue;
    const h = free.pop();
    if (h === undefined) throw new TypeError('encodeDecision: orders on more nodes than the decision picked');
    nodes[h] = o.node;
  }
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
    teacher: nodes.map((n) => byNode.get(n) ?? 0),
    teacherNodes: nodes,
  };
}

/** Greedy's recorded action on each of the teacher's nodes (0 where greedy did not pick the node). */
export function greedyOnTeacherNodes(r: ImitationRecord): number[] {
  return (r.teacherNodes ?? r.nodes).map((n) => {
    const h = r.nodes.indexOf(n);
    return h >= 0 ? r.actions[h] : 0;
  });
}

/** The teacher's decision of a record: its nodes and actions. A TypeError naming the problem when the record is not one. */
export function teacherDecision(r: ImitationRecord): GpgDecision {
  const s = r?.state;
  const tn = r?.teacherNodes ?? r?.nodes;
  const ok =
    s &&
    [s.numNodes, s.numEaps, s.numServices].every((v) => Number.isInteger(v) && v > 0) &&
    [s.nodeEap, s.x, s.eapX, s.globalX, s.actionMask, s.nodeMask].every(Array.isArray) &&
    Array.isArray(r.nodes) &&
    Array.isArray(r.actions) &&
    Array.isArray(r.teacher) &&
    r.nodes.length === r.actions.length &&
    Array.isArray(tn) &&
    tn.length === r.teacher.length &&
    r.nodes.length === r.teacher.length &&
    new Set(tn).size === tn.length &&
    s.nodeMask.length === s.numNodes &&
    s.actionMask.length === s.numNodes * actionCount(s.numServices) &&
    tn.every((n) => Number.isInteger(n) && s.nodeMask[n] === 1) &&
    r.teacher.every((a, h) => Number.isInteger(a) && s.actionMask[tn[h] * actionCount(s.numServices) + a] === 1);
  if (!ok) throw new TypeError('not an imitation record (state, nodes, actions and teacher nodes and actions of one length, each valid)');
  const state: GraphState = {
    spec: { numNodes: s.numNodes, numEaps: s.numEaps, numServices: s.numServices, nodeEap: Int32Array.from(s.nodeEap) },
    x: Float32Array.from(s.x),
    eapX: Float32Array.from(s.eapX),
    globalX: Float32Array.from(s.globalX),
    actionMask: Uint8Array.from(s.actionMask),
    nodeMask: Uint8Array.from(s.nodeMask),
  };
  return { state, nodes: [...tn], actions: [...r.teacher] };
}
