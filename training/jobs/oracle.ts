/**
 * The oracle line of `kais eval`: an upper bound on the throughput rate (in-time completions /
 * arrivals) that no dispatch + orchestration policy can exceed on the same requests, so a table
 * shows how much room is left. Pure and deterministic; O(n log n): one sort, then per window grid
 * one pass of O(n log(span / shortest window)).
 *
 * ## What a request needs (simulator semantics: sim/env.ts, cluster.ts, latency.ts)
 *
 * Request i (service w, eAP b, arrival a, deadline d, work c core-s, input m MB) is admitted iff
 * a < horizonS. It reaches its eAP at a + uploadS(m), is sent from there (not earlier) to one
 * target t, which it reaches transferS(b, t, m) later; it starts there no earlier, on a replica of
 * w holding cpuCores[w] of t's cores, runs p = c / cpuCores[w] seconds, and is in time iff its
 * finish time + returnS(b, t) <= d. So on target t its processing lies inside
 *   I_t = [lo_t, hi_t] = [a + uploadS(m) + transferS(b, t, m), d - returnS(b, t)],
 * and t is *feasible* for i iff hi_t - lo_t >= p and t could ever host w: an edge node with
 * cpuCores >= cpuCores[w] and memGB >= memGB[w] (else no replica of w can start there), or the
 * cloud (one pool of vms x vcpuPerVm cores) if cpuCores[w] fits in it. Waiting (queues, dispatch
 * timing, replica start-up), placement, memory and faults can only delay or forbid, never speed
 * up, so they are relaxed away: the bound holds whatever they do.
 *
 * ## The bound
 *
 * 1. Individual feasibility: a request with no feasible target is never in time.
 * 2. Capacity. Classes: *edge-only* requests (feasible on edge nodes only), *cloud-only*, *both*.
 *    The hull [lo_i, hi_i] of i is the smallest interval holding I_t of all its feasible targets.
 *    An in-time request holds cpuCores[w] cores for p seconds, c core-seconds in all, inside its
 *    hull, and on the edge (edge-only) or in the cloud (cloud-only). Cores in use never exceed
 *    Ce + Cc (Ce: cores of the edge nodes that can host some service, Cc: the cloud's), Ce on the
 *    edge, Cc in the cloud. So for ANY set X of feasible requests and the set S of requests a
 *    policy gets in time:
 *      sum of c over S & X  <=  C_X x (max of hi over X - min of lo over X),
 *    C_X = Ce when X holds edge-only requests only, Cc when cloud-only only, else Ce + Cc. For any
 *    family F of such sets, max |S| under the constraints of F (a knapsack relaxation, every
 *    request worth 1) bounds the in-time count of every policy.
 * 3. F is laminar (any two sets nested or disjoint): a dyadic tree of time windows of lengths
 *    L0 x 2^k from an origin T0. Each request sits at the smallest window holding its hull. The set
 *    A_W holds the requests sitting at W or below it; inside A_W, E_W and C_W hold the edge-only
 *    and the cloud-only requests sitting exactly at W.
 * 4. On a laminar family, taking the requests by increasing work and keeping each one that still
 *    fits in every set holding it gives the maximum count exactly. Exchange argument: let e be the
 *    first request kept (least work among those that fit alone; the others are in no solution)
 *    and O an optimum without e. If O + e fits everywhere, O was not optimal. Else let X be the
 *    smallest set holding e that O + e overfills; O has some f in X, and c_f >= c_e. O - f + e fits
 *    everywhere: sets holding e smaller than X were not overfilled by O + e, sets holding X hold f
 *    too (their load changes by c_e - c_f <= 0), the other sets only lose load. So some optimum
 *    keeps e, and the rest is the same problem with capacities reduced, on which the greedy goes
 *    on (induction). Capacities get a 1e-9 relative slack and hulls a 1 ns margin on each side, so
 *    rounding can only raise the bound.
 * 5. Every grid (L0, T0) gives a valid bound; the result is the least over a few origins T0.
 *
 * Not relied on, as the simulator may change them: the episode's end (a request finishing after
 * the horizon does not count today), slot boundaries, the dispatch mask, per-service replica caps
 * (draining replicas may finish their requests beyond them).
 */
import type { Request } from '../../shared/domain';
import type { Scenario } from '../../shared/scenario';
import { capacityArrays, topologyOf } from '../../shared/scenario';
import { Network } from '../../shared/network';
import type { RequestSource } from '../workload/source';
import { arraySource, isRequestSource } from '../workload/source';

/** About the memory of the bound per request read: hull, work, class, order (and the sort's temporary copy), lengths, one grid's leaves and levels. */
export const ORACLE_BYTES_PER_REQUEST = 60;

/** The rule in two sentences, for the docs and the eval table's legend. */
export const ORACLE_RULE =
  'oracle: an upper bound no dispatch or orchestration policy can beat on the same requests. A request counts only if some target ' +
  'that could host its service returns it in time with no waiting (upload + transfer + processing + return <= deadline), and the ' +
  'requests counted must fit, smallest work first, in the CPU core-seconds of the edge and the cloud within nested time windows ' +
  "around their deadlines (edge-only and cloud-only requests in their own side's cores).";

export interface OracleBound {
  /** completedInTime / arrived (0 when nothing arrived): no policy's throughput rate exceeds it */
  throughputRate: number;
  /** upper bound on the requests completed in time */
  completedInTime: number;
  /** requests with arrivalS < horizonS (those the simulator admits) */
  arrived: number;
  /** arrived requests some target could return in time with no waiting at all */
  feasible: number;
  /** feasible / arrived: the bound with unlimited capacity */
  feasibleRate: number;
  /** feasible requests whose only feasible targets are edge nodes */
  edgeOnly: number;
  /** feasible requests whose only feasible target is the cloud */
  cloudOnly: number;
  /** cores of the edge nodes that can host at least one service */
  edgeCores: number;
  /** cores of the cloud pool (0 if it can host no service) */
  cloudCores: number;
}

export interface OracleOptions {
  /** Origins of the window grids, before the first hull by these multiples (>= 0) of the median hull length; each grid gives a valid bound, the least is kept. @defaultValue DEFAULT_PHASES */
  phases?: readonly number[];
}

/** 8 grid origins spread over 8 median hull lengths (golden-ratio steps): a few tenths of a percent tighter than one grid. */
export const DEFAULT_PHASES: readonly number[] = Array.from({ length: 8 }, (_, k) => ((k * 0.6180339887) % 1) * 8);

/** One rule of the simulator: `completion + return <= deadline` counts; 1 ns of slack for rounding. */
const EPS_S = 1e-9;
const CLS_BOTH = 0;
const CLS_EDGE = 1;
const CLS_CLOUD = 2;
// module-level aliases: the hot loops look up no globals (slow inside jest's vm context)
const INF = Number.POSITIVE_INFINITY;
const { floor, clz32 } = Math;

/** Feasible requests as parallel arrays. */
interface Items {
  n: number;
  /** hull (s), widened by EPS_S on both sides */
  lo: Float64Array;
  hi: Float64Array;
  /** core-seconds */
  work: Float64Array;
  cls: Uint8Array;
}

/**
 * The bound for the requests: an array, or a source read once (either way the bound keeps about
 * ORACLE_BYTES_PER_REQUEST bytes per request).
 */
export function oracleBound(
  scenario: Scenario,
  requests: readonly Request[] | RequestSource,
  horizonS: number,
  options: OracleOptions = {},
): OracleBound {
  if (typeof horizonS !== 'number' || Number.isNaN(horizonS))
    throw new TypeError(`oracleBound: horizonS must be a number, got ${String(horizonS)}`);
  const phases = options.phases ?? DEFAULT_PHASES;
  if (phases.some((ph) => !(ph >= 0 && ph < INF)))
    throw new TypeError(`oracleBound: phases must be finite numbers >= 0, got ${phases.join(', ')}`);
  const hosts = hostTables(scenario);
  const items = feasibleItems(requests, horizonS, hosts);
  const feasible = items.n;
  let completed = feasible;
  if (feasible > 0) {
    const { lo, hi, work } = items;
    const order = new Uint32Array(feasible);
    for (let k = 0; k < feasible; k++) order[k] = k;
    order.sort((x, y) => work[x] - work[y] || x - y);
    let minLo = INF;
    let maxHi = -INF;
    let minLen = INF;
    for (let k = 0; k < feasible; k++) {
      if (lo[k] < minLo) minLo = lo[k];
      if (hi[k] > maxHi) maxHi = hi[k];
      if (hi[k] - lo[k] < minLen) minLen = hi[k] - lo[k];
    }
    // leaves no shorter than the shortest hull (shorter ones would hold nobody), at most 2^16 of them
    const L0 = Math.max(minLen, (maxHi - minLo) / 2 ** 16, 1e-6);
    const lens = new Float64Array(feasible);
    for (let k = 0; k < feasible; k++) lens[k] = hi[k] - lo[k];
    const medianLen = lens.sort()[feasible >> 1];
    for (const ph of phases) {
      const T0 = minLo - ph * medianLen;
      // the simulator starts a request on 1e-9 cores less than it needs: that much more per target
      completed = Math.min(completed, dyadicGreedy(items, order, L0, T0, hosts.edgeCores + hosts.numNodes * 1e-9, hosts.cloudCores + 1e-9));
    }
  }
  return {
    throughputRate: items.arrived > 0 ? completed / items.arrived : 0,
    completedInTime: completed,
    arrived: items.arrived,
    feasible,
    feasibleRate: items.arrived > 0 ? feasible / items.arrived : 0,
    edgeOnly: items.edgeOnly,
    cloudOnly: items.cloudOnly,
    edgeCores: hosts.edgeCores,
    cloudCores: hosts.cloudCores,
  };
}

/** Where each service can run: one representative target per link class (links are all that differ in latency). */
interface HostTables {
  net: Network;
  numNodes: number;
  numServices: number;
  numEaps: number;
  cloud: number;
  svcCpu: Float64Array;
  /** [eap * numServices + w]: a node of that eAP that can host w, else -1 */
  ownNode: Int32Array;
  /** [eap * numServices + w]: a node of another eAP that can host w, else -1 */
  otherNode: Int32Array;
  /** [w]: 1 iff cpuCores[w] fits in the cloud pool */
  cloudHosts: Uint8Array;
  edgeCores: number;
  cloudCores: number;
}

function hostTables(scenario: Scenario): HostTables {
  const topo = topologyOf(scenario);
  const N = topo.numNodes;
  const W = topo.numServices;
  const B = topo.numEaps;
  const cap = capacityArrays(scenario);
  const edgeHosts = (n: number, w: number): boolean => cap.cpu[n] >= cap.svcCpu[w] - 1e-9 && cap.mem[n] >= cap.svcMem[w] - 1e-9;
  const ownNode = new Int32Array(B * W).fill(-1);
  const otherNode = new Int32Array(B * W).fill(-1);
  for (let b = 0; b < B; b++) {
    for (let w = 0; w < W; w++) {
      const k = b * W + w;
      for (let n = 0; n < N; n++) {
        if (!edgeHosts(n, w)) continue;
        if (topo.nodeEap[n] === b) {
          if (ownNode[k] < 0) ownNode[k] = n;
        } else if (otherNode[k] < 0) otherNode[k] = n;
      }
    }
  }
  const cloudHosts = Uint8Array.from(cap.svcCpu, (c) => (c <= cap.cpu[N] + 1e-9 ? 1 : 0));
  let edgeCores = 0;
  for (let n = 0; n < N; n++) {
    let any = false;
    for (let w = 0; w < W && !any; w++) any = edgeHosts(n, w);
    if (any) edgeCores += cap.cpu[n];
  }
  return {
    net: new Network(scenario, topo.nodeEap, N + 1),
    numNodes: N,
    numServices: W,
    numEaps: B,
    cloud: N,
    svcCpu: cap.svcCpu,
    ownNode,
    otherNode,
    cloudHosts,
    edgeCores,
    cloudCores: cloudHosts.includes(1) ? cap.cpu[N] : 0,
  };
}

/** Point 1 of the header: counts the admitted requests; the feasible ones with their class and hull. */
function feasibleItems(
  requests: readonly Request[] | RequestSource,
  horizonS: number,
  h: HostTables,
): Items & { arrived: number; edgeOnly: number; cloudOnly: number } {
  const { net, numServices: W, numEaps: B, cloud, svcCpu, ownNode, otherNode, cloudHosts } = h;
  const source = isRequestSource(requests) ? requests : arraySource(requests);
  const reader = source.open();
  const n0 = source.count;
  const lo = new Float64Array(n0);
  const hi = new Float64Array(n0);
  const work = new Float64Array(n0);
  const cls = new Uint8Array(n0);
  let n = 0;
  let arrived = 0;
  let edgeOnly = 0;
  let cloudOnly = 0;
  for (let i = 0; i < n0; i++) {
    const r = reader.next();
    if (r === null) break;
    if (!(r.arrivalS < horizonS)) continue;
    arrived++;
    const w = r.service;
    const b = r.eap;
    if (!(w >= 0 && w < W && (w | 0) === w && b >= 0 && b < B && (b | 0) === b)) {
      throw new RangeError(`oracleBound: request ${r.id} has service ${w} / eAP ${b} outside the scenario`);
    }
    const p = r.workCoreS / svcCpu[w];
    const atEap = r.arrivalS + net.uploadS(r.inputMB);
    let eLo = INF;
    let eHi = -INF;
    let cLo = INF;
    let cHi = -INF;
    for (let m = 0; m < 3; m++) {
      const t = m === 0 ? ownNode[b * W + w] : m === 1 ? otherNode[b * W + w] : cloudHosts[w] === 1 ? cloud : -1;
      if (t < 0) continue;
      const tLo = atEap + net.transferS(b, t, r.inputMB);
      const tHi = r.deadlineS - net.returnS(b, t);
      if (!(tLo + p <= tHi + EPS_S)) continue;
      if (t === cloud) {
        cLo = tLo;
        cHi = tHi;
      } else {
        if (tLo < eLo) eLo = tLo;
        if (tHi > eHi) eHi = tHi;
      }
    }
    const onEdge = eHi > -INF;
    const onCloud = cHi > -INF;
    if (!onEdge && !onCloud) continue;
    lo[n] = (eLo < cLo ? eLo : cLo) - EPS_S;
    hi[n] = (eHi > cHi ? eHi : cHi) + EPS_S;
    work[n] = r.workCoreS;
    cls[n] = onEdge && onCloud ? CLS_BOTH : onEdge ? CLS_EDGE : CLS_CLOUD;
    if (!onCloud) edgeOnly++;
    if (!onEdge) cloudOnly++;
    n++;
  }
  return { n, lo, hi, work, cls, arrived, edgeOnly, cloudOnly };
}

/**
 * Points 3-4 of the header: the maximum number of items under the laminar family of the dyadic
 * grid (L0, T0), by the greedy. `order`: item indices by increasing work. Requires T0 <= every lo.
 */
function dyadicGreedy(items: Items, order: Uint32Array, L0: number, T0: number, edgeCores: number, cloudCores: number): number {
  const { n, lo, hi, work, cls } = items;
  // each item's window: level k (length L0 x 2^k) and the index of its first leaf
  const leaf = new Int32Array(n);
  const level = new Uint8Array(n);
  let maxLeaf = 0;
  for (let k = 0; k < n; k++) {
    const i0 = floor((lo[k] - T0) / L0);
    const i1 = floor((hi[k] - T0) / L0);
    leaf[k] = i0;
    level[k] = i0 === i1 ? 0 : 32 - clz32(i0 ^ i1);
    if (i1 > maxLeaf) maxLeaf = i1;
  }
  const K = maxLeaf === 0 ? 0 : 32 - clz32(maxLeaf);
  // the windows of level k are base[k] .. base[k] + (maxLeaf >> k) in one array
  const base = new Int32Array(K + 2);
  for (let k = 0; k <= K; k++) base[k + 1] = base[k] + (maxLeaf >> k) + 1;
  const size = base[K + 1];
  // spans of the sets: A (subtree, filled upwards below), E and C (items sitting at the window)
  const aLo = new Float64Array(size).fill(INF);
  const aHi = new Float64Array(size).fill(-INF);
  const eLo = new Float64Array(size).fill(INF);
  const eHi = new Float64Array(size).fill(-INF);
  const cLo = new Float64Array(size).fill(INF);
  const cHi = new Float64Array(size).fill(-INF);
  for (let k = 0; k < n; k++) {
    const v = base[level[k]] + (leaf[k] >> level[k]);
    if (lo[k] < aLo[v]) aLo[v] = lo[k];
    if (hi[k] > aHi[v]) aHi[v] = hi[k];
    if (cls[k] === CLS_EDGE) {
      if (lo[k] < eLo[v]) eLo[v] = lo[k];
      if (hi[k] > eHi[v]) eHi[v] = hi[k];
    } else if (cls[k] === CLS_CLOUD) {
      if (lo[k] < cLo[v]) cLo[v] = lo[k];
      if (hi[k] > cHi[v]) cHi[v] = hi[k];
    }
  }
  for (let k = 0; k < K; k++) {
    for (let j = 0; j <= maxLeaf >> k; j++) {
      const v = base[k] + j;
      const u = base[k + 1] + (j >> 1);
      if (aLo[v] < aLo[u]) aLo[u] = aLo[v];
      if (aHi[v] > aHi[u]) aHi[u] = aHi[v];
    }
  }
  const capA = new Float64Array(size);
  const capE = new Float64Array(size);
  const capC = new Float64Array(size);
  const capOf = (cores: number, from: number, to: number): number => {
    const c = to > from ? cores * (to - from) : 0;
    return c + 1e-9 * (1 + c);
  };
  for (let v = 0; v < size; v++) {
    capA[v] = capOf(edgeCores + cloudCores, aLo[v], aHi[v]);
    capE[v] = capOf(edgeCores, eLo[v], eHi[v]);
    capC[v] = capOf(cloudCores, cLo[v], cHi[v]);
  }
  let count = 0;
  for (let r = 0; r < n; r++) {
    const k = order[r];
    const c = work[k];
    const lv = level[k];
    const own = cls[k] === CLS_EDGE ? capE : cls[k] === CLS_CLOUD ? capC : null;
    const ownV = base[lv] + (leaf[k] >> lv);
    if (own !== null && own[ownV] < c) continue;
    let fits = true;
    for (let l = lv, j = leaf[k] >> lv; l <= K; l++, j >>= 1) {
      if (capA[base[l] + j] < c) {
        fits = false;
        break;
      }
    }
    if (!fits) continue;
    if (own !== null) own[ownV] -= c;
    for (let l = lv, j = leaf[k] >> lv; l <= K; l++, j >>= 1) capA[base[l] + j] -= c;
    count++;
  }
  return count;
}
