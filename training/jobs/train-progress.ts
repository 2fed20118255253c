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
import { runEpisode } from './rollout';
import { writePlot } from './plot';
import type { TrainEvaluation } from './train-eval';
import type { TrainOptions } from './train-options';
import { viewOfRun } from './train-eval';

export interface FrameMetrics {
  frame: number;
  episode: number;
  phase: 'bc' | 'rl';
  /** curriculum: name of the lesson */
  lesson?: string;
  'charts/throughputRate': number;
  'charts/teamReward': number;
  'charts/decisions': number;
  'losses/value': number;
  'losses/policy': number;
  'losses/entropy': number;
  'losses/bc': number;
  /** credit 'request': approximate KL of the update to the acting policy */
  'losses/approxKl'?: number;
  'charts/evalThroughputRate'?: number;
  /** --eval-trace: the evaluation on the trace window, and the selection score (mean of the two) */
  'charts/evalTraceThroughputRate'?: number;
  'charts/evalScore'?: number;
  /** --filters, last frame of an episode: share of healthy node-time the device filters excluded */
  'charts/falseExclusionRate'?: number;
  /** wall seconds of this frame (sim + act + learn), not reproducible */
  wallS: number;
  /** wall seconds of the LEARN part */
  learnS?: number;
}

/** The line of one trained frame. */
export function progressLine(m: FrameMetrics, total: number, framesThisRun: number, elapsedS: number): string {
  const fps = framesThisRun / Math.max(1e-9, elapsedS);
  const losses =
    m.phase === 'bc'
      ? `bc ${m['losses/bc'].toFixed(3)} v ${m['losses/value'].toFixed(3)}`
      : `v ${m['losses/value'].toFixed(3)} pg ${m['losses/policy'].toFixed(3)} H ${m['losses/entropy'].toFixed(2)}`;
  return `frame ${m.frame + 1}/${total} [${m.phase}] throughput ${m['charts/throughputRate'].toFixed(3)} U ${m['charts/teamReward'].toFixed(2)} ${losses} | ${m.wallS.toFixed(1)} s/frame (learn ${(m.learnS ?? 0).toFixed(1)}), ${fps.toFixed(2)} frames/s`;
}

/** The prefix of a frame's line in a curriculum run. */
export function lessonPrefix(cur: CurriculumState, lessons: Lesson[]): string {
  const lesson = lessons[cur.lesson];
  return `lesson ${cur.lesson + 1}/${lessons.length} ${lesson.name} ep ${cur.episodes + 1}/${lesson.maxEpisodes} | `;
}

export function lessonStartLine(cur: CurriculumState, lessons: Lesson[], plan: EpisodePlan, framesDone: number): string {
  const lesson = lessons[cur.lesson];
  const what = lesson.trace ? `trace ${lesson.trace}${lesson.traceWindowS ? ` [${lesson.traceWindowS.join(', ')}] s` : ''}` : lesson.workload;
  return (
    `lesson ${cur.lesson + 1}/${lessons.length} "${lesson.name}" starts at frame ${framesDone}: ${what} x${lesson.load}, ` +
    `${lesson.episodeFrames}-frame episodes, ${lesson.orchestration}, ${plan.dequeue}, ${lesson.teacher ? `cloning ${lesson.teacher}` : 'RL'}, at most ${lesson.maxEpisodes} episodes` +
    (lesson.checkpointIn ? `, from checkpoint "${lesson.checkpointIn}"` : '')
  );
}

export function lessonEndLine(index: number, lessons: Lesson[], d: PromotionDecision & { lesson: Lesson; episodes: number }, framesDone: number): string {
  return `lesson ${index + 1}/${lessons.length} "${d.lesson.name}" ended after ${d.episodes} episodes (frame ${framesDone}): ${d.reason}, ${d.detail}; checkpoint "${d.lesson.checkpointOut}"`;
}

export function evalLine(ev: TrainEvaluation, framesDone: number, config: TrainOptions): string {
  let line = `eval after ${framesDone} frames: cmmac/${config.orchestration} throughput rate ${ev.heldOut.toFixed(4)} (held-out seed)`;
  if (ev.trace !== null) line += `, trace window [${config.evalTraceWindowS.join(', ')}] s ${ev.trace.toFixed(4)}, selection score (mean) ${ev.score.toFixed(4)}`;
  return line;
}

export function resumeLine(path: string, r: { episode: number; frame: number; curriculum: CurriculumState | null }, lessons: Lesson[] | null): string {
  const { episode, frame, curriculum: cur } = r;
  const where = lessons && cur ? `, in lesson ${cur.lesson + 1}/${lessons.length} "${lessons[cur.lesson]?.name ?? '(all done)'}" after ${cur.episodes} of its episodes` : '';
  return `resuming ${path} after episode ${episode} (${frame} frames done${where})`;
}

/**
 * The learning curve: throughput rate of each training frame and of the held-out evaluations,
 * next to jsq/hpa and lec/hpa run on one episode of the same length, workload, dequeue and seed
 * (dashed: the level a heuristic reaches on this workload, frame by frame).
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
  const baseline = (d: string, orch: string) =>
    runEpisode({
      scenario,
      requests,
      frames,
      seed: o.seed,
      dispatch: makeDispatch(d, scenario),
      orchestration: makeOrchestration(orch, scenario),
      nodeDequeue: o.dequeue,
      view: viewOfRun(o),
    }).throughputPerFrame;
  writePlot(
    file,
    `kais train on ${scenario.name}: throughput rate per frame`,
    [
      { name: 'cmmac (training)', values: metrics.map((m) => m['charts/throughputRate']) },
      { name: 'cmmac (held-out eval)', values: metrics.map((m) => m['charts/evalThroughputRate'] ?? NaN) },
      { name: 'jsq/hpa', values: baseline('jsq', 'hpa'), dashed: true },
      { name: 'lec/hpa', values: baseline('lec', 'hpa'), dashed: true },
    ],
    'frame',
    'throughput rate',
  );
}
