/**
 * What happened at each target (edge nodes, then the cloud) over a run, counted the same way by the
 * simulator (training/sim/env.ts) and the emulated cluster (orchestrator/emulated-cluster.ts), so
 * that `kais up` can put the live and the predicted counts side by side (issue 13: where live and
 * predicted differ, target by target).
 */
export interface TargetTally {
  /** requests that reached the target (a request refused by a node and retried on the cloud counts at both) */
  sent: number[];
  /** refused on arrival: 503 full, no replica, node failed */
  refused: number[];
  /** queued, then dropped unstarted because the result could no longer be back in time (504 expired at node) */
  expired: number[];
  /** served (in time or late) */
  completed: number[];
  /** queued or running when the node failed, or its replica was removed */
  lost: number[];
}

export const TALLY_KEYS = ['sent', 'refused', 'expired', 'completed', 'lost'] as const satisfies readonly (keyof TargetTally)[];

export function emptyTally(targets: number): TargetTally {
  return {
    sent: new Array<number>(targets).fill(0),
    refused: new Array<number>(targets).fill(0),
    expired: new Array<number>(targets).fill(0),
    completed: new Array<number>(targets).fill(0),
    lost: new Array<number>(targets).fill(0),
  };
}

export function resetTally(t: TargetTally): void {
  for (const k of TALLY_KEYS) t[k].fill(0);
}
