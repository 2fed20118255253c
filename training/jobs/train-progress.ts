/**
 * What `kais train` prints while it runs (one line per frame, lessons, evaluations, resume) and the
 * learning curve of `--plot`. Lines go to the log callback (stderr on the command line).
 */
import type { Lesson, PromotionDecision } from '../curriculum/schedule';
import type { CurriculumState } from '../curriculum/tracker';
import type { EpisodePlan } from '../curriculum/tracker';
import { loadScenario } from '../../shared/scenario';
import { buildRequests } from '../workload';
import { makeDispatch, makeOrchestration } from '../baselines/registry';
import { round, runEpisode } from './rollout';
import type { FrameStats } from '../sim/env';
import { writePlot } from './plot';
import type { TrainEvaluation } from './train-eval';
import type { TrainOptions } from './train-options';
import { viewOfRun } from './train-eval';

export interface FrameMetrics {
  frame: number;
  episode: number;
  /** frozen: cMMAC acts by argmax and does not learn (a GPG lesson of --policies cmmac/gpg) */
  phase: 'bc' | 'rl' | 'frozen';
  /** curriculum: name of the lesson */
  lesson?: string;
  /** in-time completions in the frame / arrivals in the frame: above 1 when earlier frames' requests finish in it (promotion judges it) */
  'charts/throughputRate': number;
  /** of the requests answered or dropped in the frame, the share answered in time (at most 1; what the line and the curve show) */
  'charts/inTimeShare'?: number;
  /** team reward per decision slot of the frame */
  'charts/teamReward': number;
  'charts/decisions': number;
  'losses/value': number;
  'losses/policy': number;
  'losses/entropy': number;
  'losses/bc': number;
  /** credit 'request': approximate KL of the update to the acting policy */
  'losses/approxKl'?: number;
  /** --externality: mean queueing blame of the update's resolved decisions (training/sim/blame.ts) */
  'credit/meanBlame'?: number;
  'charts/evalThroughputRate'?: number;
  /** --eval-trace: the evaluation on the trace window, and the selection score (mean of the two) */
  'charts/evalTraceThroughputRate'?: number;
  'charts/evalScore'?: number;
  /** --policies cmmac/gpg, last frame of an episode where GPG learned: its update's figures, mean throughput rate of its rollouts */
  'gpg/meanReturn'?: number;
  'gpg/nodeEntropy'?: number;
  'gpg/scaleEntropy'?: number;
  'gpg/rolloutThroughputRate'?: number;
  /** --filters, last frame of an episode: share of healthy node-time the device filters excluded */
  'charts/falseExclusionRate'?: number;
  /** wall seconds of this frame (sim + act + learn), not reproducible */
  wallS: number;
  /** wall seconds of the LEARN part */
  learnS?: number;
}

/** What the columns of the frame lines mean (printed once, before the first frame). */
export const PROGRESS_LEGEND = [
  'columns: [bc] cloning the teacher / [rl] the actor acts and learns / [frozen] the actor acts (argmax) while GPG learns;',
  '  in time: share of the requests answered or dropped in the frame that were answered in time (at most 1);',
  '  U: team reward per decision slot (u_b summed over the eAPs); bc: cloning loss (cross-entropy);',
  "  v: critic loss; pg: policy loss; H: policy entropy; ETA: the frames left at this run's frames/s",
  '  (a curriculum can end before --frames). Ctrl-C stops at the next decision slot and keeps the last checkpoint.',
].join('\n');

/** The line of one trained frame. */
export function progressLine(m: FrameMetrics, total: number, framesThisRun: number, elapsedS: number): string {
  const fps = framesThisRun / Math.max(1e-9, elapsedS);
  const losses =
    m.phase === 'bc'
      ? `bc ${m['losses/bc'].toFixed(3)} v ${m['losses/value'].toFixed(3)}`
      : `v ${m['losses/value'].toFixed(3)} pg ${m['losses/policy'].toFixed(3)} H ${m['losses/entropy'].toFixed(2)}`;
  const inTime = m['charts/inTimeShare'] ?? m['charts/throughputRate'];
  const eta = duration((total - m.frame - 1) / Math.max(1e-9, fps));
  return `frame ${m.frame + 1}/${total} [${m.phase}] in time ${inTime.toFixed(3)} U ${m['charts/teamReward'].toFixed(2)} ${losses} | ${m.wallS.toFixed(1)} s/frame (learn ${(m.learnS ?? 0).toFixed(1)}), ${fps.toFixed(2)} frames/s, ETA ${eta}`;
}

/** 75 -> "1m15s", 3725 -> "1h02m". */
export function duration(s: number): string {
  const t = Math.round(s);
  if (t < 60) return `${t}s`;
  if (t < 3600) return `${Math.floor(t / 60)}m${String(t % 60).padStart(2, '0')}s`;
  return `${Math.floor(t / 3600)}h${String(Math.floor((t % 3600) / 60)).padStart(2, '0')}m`;
}

/** Ctrl-C: where the run stands and how to continue it. */
export function interruptedLine(out: string, framesDone: number, total: number): string {
  return `kais train: interrupted; ${out} holds ${framesDone} of ${total} frames (the last checkpoint, at an episode's end). Continue with: kais train --resume --out ${out}`;
}

/**
 * A frame's two rates. throughputRate: in-time completions in the frame / arrivals in the frame,
 * above 1 when requests of earlier frames finish in this one (a small scenario's frames hold few
 * requests); promotion and the summary keep it. inTimeShare: what the line and the curve show.
 */
export function frameRates(f: FrameStats | undefined): Pick<FrameMetrics, 'charts/throughputRate' | 'charts/inTimeShare'> {
  if (!f) return { 'charts/throughputRate': 0, 'charts/inTimeShare': 0 };
  const resolved = f.completedInTime + f.failed;
  return {
    'charts/throughputRate': f.arrived > 0 ? round(f.completedInTime / f.arrived, 4) : 0,
    'charts/inTimeShare': resolved > 0 ? round(f.completedInTime / resolved, 4) : 0,
  };
}

/** `kais train`'s result line (--json): the last frame's rate and the last evaluation. */
export function summaryOf(r: {
  config: { out: string };
  framesDone: number;
  metrics: FrameMetrics[];
  finalEval: number | null;
  wallS: number;
  framesPerS: number;
}) {
  const last = r.metrics[r.metrics.length - 1];
  return {
    out: r.config.out,
    frames: r.framesDone,
    throughputRate: last ? last['charts/throughputRate'] : null,
    evalThroughputRate: r.finalEval,
    wallS: r.wallS,
    framesPerS: r.framesPerS,
  };
}

/** The prefix of a frame's line in a curriculum run. */
export function lessonPrefix(cur: CurriculumState, lessons: Lesson[]): string {
  const lesson = lessons[cur.lesson];
  return `lesson ${cur.lesson + 1}/${lessons.length} ${lesson.name} ep ${cur.episodes + 1}/${lesson.maxEpisodes} | `;
}

export function lessonStartLine(
  cur: CurriculumState,
  lessons: Lesson[],
  plan: EpisodePlan,
  framesDone: number,
  origin: { which: 'best' | 'last'; frame: number } | null = null,
): string {
  const lesson = lessons[cur.lesson];
  const what = lesson.trace
    ? `trace ${lesson.trace}${lesson.traceWindowS ? ` [${lesson.traceWindowS.join(', ')}] s` : ''}`
    : lesson.workload;
  return (
    `lesson ${cur.lesson + 1}/${lessons.length} "${lesson.name}" starts at frame ${framesDone}: ${what} x${lesson.load}, ` +
    `${lesson.episodeFrames}-frame episodes, ${lesson.orchestration}, ${plan.dequeue}, ${lesson.teacher ? `cloning ${lesson.teacher}` : 'RL'}, at most ${lesson.maxEpisodes} episodes` +
    (lesson.learn ? `, learning ${lesson.learn.join(' and ')}` : '') +
    (plan.cloudVms !== null ? `, a cloud of ${typeof plan.cloudVms === 'number' ? plan.cloudVms : plan.cloudVms.join('-')} VMs` : '') +
    (lesson.checkpointIn ? `, from checkpoint "${lesson.checkpointIn}"` : '') +
    (origin ? ` (${origin.which === 'best' ? 'its best evaluation' : 'where that lesson ended'}, frame ${origin.frame})` : '') +
    (lesson.checkpointFrom === 'best' && origin?.which === 'last' ? ': that lesson ran no evaluation' : '')
  );
}

export function lessonEndLine(
  index: number,
  lessons: Lesson[],
  d: PromotionDecision & { lesson: Lesson; episodes: number },
  framesDone: number,
): string {
  return `lesson ${index + 1}/${lessons.length} "${d.lesson.name}" ended after ${d.episodes} episodes (frame ${framesDone}): ${d.reason}, ${d.detail}; checkpoint "${d.lesson.checkpointOut}"`;
}

export function evalLine(ev: TrainEvaluation, framesDone: number, config: TrainOptions, orchestration?: string): string {
  let line = `eval after ${framesDone} frames: cmmac/${orchestration ?? config.orchestration} throughput rate ${ev.heldOut.toFixed(4)} (held-out seed)`;
  if (ev.trace !== null)
    line += `, trace window [${config.evalTraceWindowS.join(', ')}] s ${ev.trace.toFixed(4)}, selection score (mean) ${ev.score.toFixed(4)}`;
  return line;
}

export function resumeLine(
  path: string,
  r: { episode: number; frame: number; curriculum: CurriculumState | null },
  lessons: Lesson[] | null,
): string {
  const { episode, frame, curriculum: cur } = r;
  const where =
    lessons && cur
      ? `, in lesson ${cur.lesson + 1}/${lessons.length} "${lessons[cur.lesson]?.name ?? '(all done)'}" after ${cur.episodes} of its episodes`
      : '';
  return `resuming ${path} after episode ${episode} (${frame} frames done${where})`;
}

/**
 * The learning curve: each training frame's in-time share (at most 1; runs stored before it existed:
 * the throughput rate) and the held-out evaluations' throughput rates, next to the throughput rate
 * jsq/hpa and lec/hpa reach on one episode of the same length, workload, dequeue and seed (dashed).
 */
export function writeLearningCurve(file: string, metrics: FrameMetrics[], o: TrainOptions): void {
  const scenario = loadScenario(o.scenario);
  const frames = Math.max(1, metrics.length);
  const requests = buildRequests({
    scenario,
    workload: o.workload,
    tracePath: o.trace ?? null,
    seed: o.seed,
    load: o.load,
    durationS: frames * scenario.slotsPerFrame * scenario.slotS,
  });
  const baseline = (d: string, orch: string) => {
    const r = runEpisode({
      scenario,
      requests,
      frames,
      seed: o.seed,
      dispatch: makeDispatch(d, scenario),
      orchestration: makeOrchestration(orch, scenario),
      nodeDequeue: o.dequeue,
      view: viewOfRun(o),
    });
    return new Array<number>(frames).fill(r.throughputRate);
  };
  writePlot(
    file,
    `kais train on ${scenario.name}: in-time share per frame, throughput rate of evaluations and baselines`,
    [
      { name: 'cmmac (training)', values: metrics.map((m) => m['charts/inTimeShare'] ?? m['charts/throughputRate']) },
      { name: 'cmmac (held-out eval)', values: metrics.map((m) => m['charts/evalThroughputRate'] ?? NaN) },
      { name: 'jsq/hpa (episode)', values: baseline('jsq', 'hpa'), dashed: true },
      { name: 'lec/hpa (episode)', values: baseline('lec', 'hpa'), dashed: true },
    ],
    'frame',
    'rate (at most 1)',
  );
}
