/**
 * Measures the `queue-lookahead` teacher (training/baselines/queue-teacher.ts) as a policy on TRAINING
 * conditions only (scripts/training-conditions.ts, the same as scripts/teacher-search.ts).
 *
 *   npx tsc -p tsconfig.json && node dist/scripts/lookahead-search.js '[{"margin":0.9}, "deadline-load"]'
 *   (NS episodes per workload, default 12; TRACE as in teacher-search; WINDOW=25000,30000 replays
 *   the validation window instead of the training window; DEQUEUES=discounted,edf)
 *
 * A variant is a train teacher's name, a `kais eval` dispatch baseline, or an object of
 * QueueLookaheadOptions.
 */
import { QueueLookaheadDispatch, type QueueLookaheadOptions } from '../training/baselines/queue-teacher';
import { loadScenario } from '../shared/scenario';
import { compareOnTrainingConditions, namedVariant } from './training-conditions';

const scenario = loadScenario('kais');
const variants = JSON.parse(process.argv[2] ?? '[{}]') as (string | QueueLookaheadOptions)[];
compareOnTrainingConditions(
  scenario,
  variants.map((v) =>
    typeof v === 'string' ? namedVariant(v, scenario) : { name: `ql ${JSON.stringify(v)}`, make: () => new QueueLookaheadDispatch(v) },
  ),
);
