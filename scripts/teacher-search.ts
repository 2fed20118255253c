/**
 * Teacher search for the warm start of `kais train`, on TRAINING conditions only (docs/cmmac.md
 * "Teacher search on training data"): never the test seeds 2000-2002, the validation seeds
 * 1000003-4 or the trace rows after 25000 s.
 *
 *   npm run build && node dist/scripts/teacher-search.js '["deadline-load", {"margin": 0.75, "fallback": "min-eta"}]'
 *   (NS=12 episodes per workload by default; TRACE=path/to/v2017_batch_task.csv, default ../shared/data/alibaba)
 *
 * Conditions and output: scripts/training-conditions.ts (shared with scripts/lookahead-search.ts).
 *
 * A variant is a train teacher's name (training/baselines/teacher.ts), a `kais eval` dispatch baseline,
 * or an object of the knobs below (a search-only generalisation of deadline-load).
 */
import type { ClusterView, DispatchItem, DispatchPolicy } from '../shared/policy';
import { pickByEta, type EtaRule } from '../shared/eta';
import { loadScenario } from '../shared/scenario';
import { compareOnTrainingConditions, namedVariant } from './training-conditions';

interface Knobs {
  /** feasible iff margin x eta <= slack (deadline-load: 0.7) */
  margin?: number;
  /** key = loadWeight x load + etaWeight x eta (+ cloudPenalty at the cloud, - sameEapBonus at the own eAP's nodes) */
  etaWeight?: number;
  loadWeight?: number;
  /** 'service': (queued + busy of w) / ready replicas (jsq's); 'node': all queued / cores; 'none' */
  load?: 'service' | 'node' | 'none';
  cloudPenalty?: number;
  sameEapBonus?: number;
  /** no feasible target: the cloud, or the smallest eta (lec's) */
  fallback?: 'cloud' | 'min-eta';
}

class SearchTeacher implements DispatchPolicy {
  readonly name = 'search';
  private readonly rule: EtaRule;
  constructor(k: Required<Knobs>) {
    this.rule = {
      margin: k.margin,
      fallback: k.fallback,
      key: (t, eta, item, view) => {
        const w = item.request.service;
        let ld = 0;
        if (k.load === 'service') ld = (view.serviceQueueLen(t, w) + view.busyReplicas(t, w)) / Math.max(1, view.readyReplicas(t, w));
        else if (k.load === 'node') ld = view.queueLen(t) / Math.max(1, view.cpuCores(t));
        let key = k.loadWeight * ld + k.etaWeight * eta;
        if (t === view.cloudTarget) key += k.cloudPenalty;
        else if (view.nodeEap(t) === item.eap) key -= k.sameEapBonus;
        return key;
      },
    };
  }
  decide(item: DispatchItem, view: ClusterView): number {
    return pickByEta(item, view, this.rule);
  }
}

const DEFAULT_KNOBS: Required<Knobs> = {
  margin: 0.7,
  etaWeight: 0.5,
  loadWeight: 1,
  load: 'service',
  cloudPenalty: 0,
  sameEapBonus: 0,
  fallback: 'cloud',
};

const scenario = loadScenario('kais');
const variants = JSON.parse(process.argv[2] ?? '["deadline-load"]') as (string | Knobs)[];
compareOnTrainingConditions(
  scenario,
  variants.map((v) =>
    typeof v === 'string'
      ? namedVariant(v, scenario)
      : { name: JSON.stringify(v), make: () => new SearchTeacher({ ...DEFAULT_KNOBS, ...v }) },
  ),
);
