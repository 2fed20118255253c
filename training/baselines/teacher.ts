/**
 * `deadline-load`: the warm-start teacher of `kais train`, a dispatch heuristic like the baselines
 * beside it (not one of `kais eval`'s: it only exists to be cloned, so it is train-only, as is
 * queue-teacher.ts, which reads what only the simulator knows).
 *
 * Per request: among the valid targets whose expected completion time still meets the deadline
 * with a safety factor (`margin x eta <= slack`, shared/eta.ts), take the least loaded one (queued
 * and busy requests of the service per ready replica, `jsq`'s measure) with a small penalty on eta;
 * when no target meets it, the cloud (a hopeless request should not take an edge queue slot from
 * one that can still make it).
 *
 * Measured on `kais` / p4 / hpa, held-out seeds 2000-2002, 5 frames (docs/cmmac.md): margin 0.7
 * (eta overestimates the wait: it assumes every request ahead looks like this one) and eta weight
 * 0.5 beat jsq by about 2% and lec by about 5%; margin 1.0 is no better than jsq.
 *
 * `deadline-load-eta` (margin 0.75, and lec's fallback: when no target meets the deadline, the one
 * with the smallest eta instead of the cloud) came out of a second search on training conditions
 * only (p4 with --seed 1's episode seeds and the early Alibaba window, both dequeues; docs/cmmac.md
 * "Teacher search on training data"): +0.5% over `deadline-load` in the mean of the 4 columns.
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../../shared/policy';
import { pickByEta, type EtaRule } from '../../shared/eta';
import { QueueLookaheadDispatch } from './queue-teacher';

export interface DeadlineLoadOptions {
  /** A target counts as meeting the deadline when margin x eta <= slack. @defaultValue 0.7 */
  margin?: number;
  /** Weight of eta (s) added to the load (requests per replica). @defaultValue 0.5 */
  etaWeight?: number;
  /**
   * When no target meets the deadline: 'cloud' (a hopeless request keeps no edge queue slot) or
   * 'min-eta' (the valid target with the smallest eta, `lec`'s choice). @defaultValue 'cloud'
   */
  fallback?: 'cloud' | 'min-eta';
  /** Name the policy reports. @defaultValue 'deadline-load' */
  name?: string;
}

export class DeadlineLoadDispatch implements DispatchPolicy, EtaRule {
  readonly name: string;
  readonly margin: number;
  readonly etaWeight: number;
  readonly fallback: 'cloud' | 'min-eta';

  constructor(o: DeadlineLoadOptions = {}) {
    this.margin = o.margin ?? 0.7;
    this.etaWeight = o.etaWeight ?? 0.5;
    this.fallback = o.fallback ?? 'cloud';
    this.name = o.name ?? 'deadline-load';
  }

  /** jsq's load (queued and busy requests of the service per ready replica) + etaWeight x eta */
  key(t: number, eta: number, item: DispatchItem, view: ClusterView): number {
    const w = item.request.service;
    const ready = Math.max(1, view.readyReplicas(t, w));
    return (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / ready + this.etaWeight * eta;
  }

  decide(item: DispatchItem, view: ClusterView): number {
    return pickByEta(item, view, this);
  }
}

export const TRAIN_TEACHERS = [
  'deadline-load',
  'deadline-load-eta',
  'queue-lookahead',
  'queue-lookahead-deadline',
  'queue-lookahead-slack',
] as const;

/** A train-only teacher by name, or null (then the name is a `kais eval` baseline). */
export function makeTrainTeacher(name: string): DispatchPolicy | null {
  if (name === 'deadline-load') return new DeadlineLoadDispatch();
  if (name === 'deadline-load-eta') return new DeadlineLoadDispatch({ name, margin: 0.75, fallback: 'min-eta' });
  // queue-teacher.ts: reads the simulator's queues and the requests' true work (own work: true, or
  // inferred from the relative deadline); margin 1 and busyFrac 0.25 from scripts/lookahead-search.ts
  if (name === 'queue-lookahead') return new QueueLookaheadDispatch({ name, margin: 1, busyFrac: 0.25 });
  if (name === 'queue-lookahead-deadline') return new QueueLookaheadDispatch({ name, margin: 1, busyFrac: 0.25, ownWork: 'deadline' });
  // own processing time from what the actor observes: (slack + 0.4 s - deadlineBaseS) / deadlineSlack
  if (name === 'queue-lookahead-slack')
    return new QueueLookaheadDispatch({ name, margin: 1, busyFrac: 0.25, ownWork: 'slack', slackAgeS: 0.4 });
  return null;
}
