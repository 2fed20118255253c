/**
 * Dequeue strategies (ALGORITHMS.md section 2): the order in which an eAP queue or a node queue
 * hands out its requests. Each strategy is a priority key, smaller first:
 * - `fifo`: arrival order at the queue.
 * - `edf` (latency-greedy): earliest deadline first.
 * - `discounted` (discounted experience): predicted slack = deadline - now - predicted completion
 *   time, where the prediction uses discounted averages (factor 0.9) of observed processing time
 *   and queueing delay; smallest non-negative slack first, hopeless requests (negative slack) last.
 *   Its keys change with time, so queues using it are re-keyed every slot.
 */
export type DequeueName = 'fifo' | 'edf' | 'discounted';
export const DEQUEUE_NAMES: DequeueName[] = ['fifo', 'edf', 'discounted'];

/** Offset that sorts hopeless requests after every request that can still make it. */
export const HOPELESS_OFFSET = 1e9;

/** Key of the discounted-experience rule from a predicted slack (s). */
export function slackKey(slackS: number): number {
  return slackS >= 0 ? slackS : HOPELESS_OFFSET - slackS;
}

/** Exponentially discounted running mean: m <- f m + (1 - f) x. */
export function discounted(mean: number, x: number, factor = 0.9): number {
  return factor * mean + (1 - factor) * x;
}
