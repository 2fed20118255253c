/**
 * The fault model, one for the simulator (training/sim: env.ts plays it, faults.ts generates it
 * from a rate or from real server events) and the emulated cluster of `kais node` / `kais up`
 * (orchestrator/emulated-cluster.ts plays it in real time).
 *
 * A fault fails edge node `node` at `startS` (scenario seconds from the start) for `durationS`:
 * - from startS - precursorS to startS the node is `abnormal`: its telemetry is erratic (what the
 *   device filters should catch) but it still serves;
 * - from startS to startS + durationS it is `failed`: it serves nothing, what it held is lost;
 * - then it is `ok` again.
 * `precursorS` is the fault's own when given, else the player's default (DEFAULT_PRECURSOR_S).
 */

export interface Fault {
  node: number;
  startS: number;
  durationS: number;
  /** Seconds of abnormal telemetry before the failure. @defaultValue the player's (DEFAULT_PRECURSOR_S) */
  precursorS?: number;
}

export type NodeFaultState = 'ok' | 'abnormal' | 'failed';

export const NODE_FAULT_STATES: readonly NodeFaultState[] = ['ok', 'abnormal', 'failed'];

/** @defaultValue 20 s, the simulator's telemetry precursor. */
export const DEFAULT_PRECURSOR_S = 20;

/** State of node n at time t under the faults (the worst that applies). */
export function faultState(faults: readonly Fault[], n: number, t: number, precursorS = DEFAULT_PRECURSOR_S): NodeFaultState {
  let state: NodeFaultState = 'ok';
  for (const f of faults) {
    if (f.node !== n || t >= f.startS + f.durationS) continue;
    if (t >= f.startS) return 'failed';
    if (t >= f.startS - (f.precursorS ?? precursorS)) state = 'abnormal';
  }
  return state;
}

/**
 * Every state change the faults make, in time order: what a real-time player schedules. The states
 * are faultState's at each fault's edges (the worst that applies), so overlapping faults on one
 * node play as the simulator plays them: a later, shorter fault's end or precursor no longer cut
 * an earlier one short.
 */
export function faultTransitions(
  faults: readonly Fault[],
  precursorS = DEFAULT_PRECURSOR_S,
): { atS: number; node: number; state: NodeFaultState }[] {
  const out: { atS: number; node: number; state: NodeFaultState }[] = [];
  for (const n of new Set(faults.map((f) => f.node))) {
    const mine = faults.filter((f) => f.node === n);
    const edges = mine.flatMap((f) => [Math.max(0, f.startS - (f.precursorS ?? precursorS)), f.startS, f.startS + f.durationS]);
    let state: NodeFaultState = 'ok';
    for (const atS of [...new Set(edges)].sort((a, b) => a - b)) {
      const next = faultState(mine, n, atS, precursorS);
      if (next !== state) out.push({ atS, node: n, state: (state = next) });
    }
  }
  return out.sort((a, b) => a.atS - b.atS || a.node - b.node);
}

/** The fields a fault may have: any other is a mistake (a misspelt precursorS was silently the default). */
const FAULT_FIELDS: readonly string[] = ['node', 'startS', 'durationS', 'precursorS'];

/** Checks a list of faults read from outside (JSON); throws TypeError naming the first bad one. */
export function validateFaults(raw: unknown, numNodes: number): Fault[] {
  if (!Array.isArray(raw)) throw new TypeError('faults must be a list of {node, startS, durationS, precursorS?}');
  return raw.map((f: unknown, i) => {
    const o = (typeof f === 'object' && f !== null ? f : {}) as Record<string, unknown>;
    const unknown = Array.isArray(f) ? undefined : Object.keys(o).find((k) => !FAULT_FIELDS.includes(k));
    if (unknown !== undefined) throw new TypeError(`faults[${i}].${unknown}: unknown field (a fault has ${FAULT_FIELDS.join(', ')})`);
    // finite: JSON's 1e400 is Infinity
    const time = (x: unknown) => typeof x === 'number' && Number.isFinite(x) && x >= 0;
    const ok =
      Number.isInteger(o.node) &&
      (o.node as number) >= 0 &&
      (o.node as number) < numNodes &&
      time(o.startS) &&
      time(o.durationS) &&
      (o.durationS as number) > 0 &&
      (o.precursorS === undefined || time(o.precursorS));
    if (!ok)
      throw new TypeError(
        `fault ${JSON.stringify(f)}: needs a node in 0..${numNodes - 1}, startS >= 0, durationS > 0, precursorS >= 0 if given`,
      );
    return {
      node: o.node as number,
      startS: o.startS as number,
      durationS: o.durationS as number,
      ...(o.precursorS === undefined ? {} : { precursorS: o.precursorS as number }),
    };
  });
}
