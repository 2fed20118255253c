/**
 * Where a curriculum run stands (`kais train --curriculum`): the current lesson, its episodes'
 * training rates, the lessons started so far and the checkpoint labels finished lessons wrote.
 * The state goes into every checkpoint so that `--resume` continues in the same lesson with the
 * same history; promotion itself is schedule.ts's pure decidePromotion.
 */
import type { DequeueName } from '../../shared/dequeue';
import type { Rng } from '../../shared/rng';
import type { Scenario } from '../../shared/scenario';
import type { WorkloadName } from '../workload';
import { decidePromotion, type Lesson, type PromotionDecision } from './schedule';

/** Where a curriculum run stands, stored in every checkpoint (state.curriculum). */
export interface CurriculumState {
  /** index of the current lesson (lessons.length when all are done) */
  lesson: number;
  /** episodes of the current lesson done */
  episodes: number;
  /** their training throughput rates (the history decidePromotion judges) */
  rates: number[];
  startFrame: number;
  startEpisode: number;
  /** the current lesson's best held-out evaluation so far (its checkpoint: episode and frame) */
  best?: { episode: number; frame: number; eval: number };
}

/** One started lesson (meta 'lessons' of the checkpoint file). */
export interface LessonRecord {
  lesson: number;
  name: string;
  startFrame: number;
  startEpisode: number;
  endFrame?: number;
  endEpisode?: number;
  episodes?: number;
  reason?: string;
  detail?: string;
}

/**
 * A checkpoint a finished lesson labelled (meta 'labels': label -> its episode and frame), with
 * the checkpoint of the lesson's best held-out evaluation when it ran any (`checkpointFrom: best`).
 */
export interface CheckpointLabel {
  episode: number;
  frame: number;
  best?: { episode: number; frame: number };
}

/** What one episode trains on: a lesson's settings, or the run's own (single lesson). */
export interface EpisodePlan {
  workload: WorkloadName;
  trace: string | null;
  traceWindowS: [number, number] | null;
  load: number;
  orchestration: string;
  dequeue: DequeueName;
  /** curriculum: the lesson clones this heuristic (single lesson: --bc-frames decides per frame) */
  teacher: string | null;
  lr: number;
  entropyCoef: number;
  teamShare: number;
  /** credit request: the charge per failure a decision's request caused by queueing (train-learn.ts) */
  externality: number;
  /** the parts that learn (`kais train --policies cmmac/gpg`); cmmac alone otherwise */
  learn: ('cmmac' | 'gpg')[];
  /** the cloud's VMs in the training episodes (lesson field cloudVms: a number, or a range drawn per episode); null: the scenario's */
  cloudVms: number | [number, number] | null;
}

/** The run's options a plan falls back on. */
export interface RunSettings {
  workload: WorkloadName;
  trace: string | null;
  load: number;
  orchestration: string;
  dequeue: DequeueName;
  lr: number;
  entropyCoef: number;
  teamShare: number;
  /** absent in runs written before --externality (0) */
  externality?: number;
}

/** A single-lesson run: every episode on the run's own options. */
export function singlePlan(c: RunSettings): EpisodePlan {
  return {
    workload: c.workload,
    trace: c.trace,
    traceWindowS: null,
    load: c.load,
    orchestration: c.orchestration,
    // runs written before --dequeue existed trained with the env's default (edf)
    dequeue: c.dequeue ?? 'edf',
    teacher: null,
    lr: c.lr,
    entropyCoef: c.entropyCoef,
    teamShare: c.teamShare,
    externality: c.externality ?? 0,
    learn: ['cmmac'],
    cloudVms: null,
  };
}

/**
 * The scenario an episode simulates under a plan's cloudVms: the run's (null), its cloud with that many
 * VMs, or with a number drawn from [min, max] by `rng` (one draw; the caller seeds it per episode).
 */
export function withCloudVms(s: Scenario, cloudVms: EpisodePlan['cloudVms'], rng: Rng): Scenario {
  if (cloudVms === null) return s;
  const vms = typeof cloudVms === 'number' ? cloudVms : cloudVms[0] + rng.int(cloudVms[1] - cloudVms[0] + 1);
  return { ...s, cloud: { ...s.cloud, vms } };
}

export function lessonPlan(l: Lesson, c: RunSettings): EpisodePlan {
  return {
    workload: l.workload,
    trace: l.trace ?? null,
    traceWindowS: l.traceWindowS ?? null,
    load: l.load,
    orchestration: l.orchestration,
    dequeue: l.dequeue ?? c.dequeue,
    teacher: l.teacher ?? null,
    lr: l.lr ?? c.lr,
    entropyCoef: l.entropyCoef ?? c.entropyCoef,
    teamShare: l.teamShare ?? c.teamShare,
    externality: l.externality ?? c.externality ?? 0,
    learn: l.learn ?? ['cmmac'],
    cloudVms: l.cloudVms ?? null,
  };
}

/** What a stored run holds about its curriculum (all null for a fresh run). */
export interface StoredCurriculum {
  state: CurriculumState | null;
  log: LessonRecord[] | null;
  labels: Record<string, CheckpointLabel> | null;
}

export class CurriculumTracker {
  state: CurriculumState;
  /** the lessons started so far (meta 'lessons') */
  readonly log: LessonRecord[];
  /** checkpoint labels written by finished lessons (meta 'labels') */
  readonly labels: Record<string, CheckpointLabel>;

  constructor(
    readonly lessons: Lesson[],
    stored: StoredCurriculum,
  ) {
    this.state = stored.state ?? { lesson: 0, episodes: 0, rates: [], startFrame: 0, startEpisode: 0 };
    this.log = stored.log ?? [];
    this.labels = stored.labels ?? {};
  }

  /** The current lesson, null when all are done. */
  get lesson(): Lesson | null {
    return this.lessons[this.state.lesson] ?? null;
  }

  /** Whether the next episode is the current lesson's first. */
  get starting(): boolean {
    return this.state.episodes === 0;
  }

  /**
   * The current lesson starts at `episode`: records it (once, also across a resume) and returns the
   * checkpoint to start from when its checkpointIn is not where the run stands.
   */
  start(episode: number, framesDone: number, lastCheckpointEpisode: number): CheckpointLabel | null {
    const lesson = this.lesson!;
    const from = this.origin();
    if (!this.log.some((r) => r.lesson === this.state.lesson)) {
      this.log.push({ lesson: this.state.lesson, name: lesson.name, startFrame: framesDone, startEpisode: episode });
    }
    return from && from.episode !== lastCheckpointEpisode ? from : null;
  }

  /**
   * The checkpoint the current lesson starts from (its checkpointIn's: the best evaluation's with
   * `checkpointFrom: best` when that lesson ran one, else where it ended), or null without checkpointIn.
   */
  origin(): (CheckpointLabel & { which: 'best' | 'last' }) | null {
    const lesson = this.lesson!;
    const label = lesson.checkpointIn !== undefined ? this.labels[lesson.checkpointIn] : undefined;
    if (!label) return null;
    return lesson.checkpointFrom === 'best' && label.best ? { ...label.best, which: 'best' } : { episode: label.episode, frame: label.frame, which: 'last' };
  }

  /** A held-out evaluation of the checkpoint this episode writes: the lesson's best when it beats the ones before. */
  evaluated(episode: number, framesDone: number, score: number): void {
    if (this.state.best === undefined || score > this.state.best.eval) this.state = { ...this.state, best: { episode, frame: framesDone, eval: score } };
  }

  /**
   * An episode of the current lesson ended with this mean training rate: decidePromotion judges
   * the lesson's rates, and a promoted lesson labels this episode's checkpoint and ends.
   */
  endEpisode(episode: number, framesDone: number, rate: number): PromotionDecision & { lesson: Lesson; episodes: number } {
    const lesson = this.lesson!;
    const cur = { ...this.state, episodes: this.state.episodes + 1, rates: [...this.state.rates, rate] };
    const d = decidePromotion(lesson, cur.rates);
    this.state = cur;
    if (d.promote) {
      const rec = this.log.find((r) => r.lesson === cur.lesson)!;
      Object.assign(rec, { endFrame: framesDone, endEpisode: episode, episodes: cur.episodes, reason: d.reason, detail: d.detail });
      const best = cur.best ? { best: { episode: cur.best.episode, frame: cur.best.frame } } : {};
      this.labels[lesson.checkpointOut] = { episode, frame: framesDone, ...best };
      this.state = { lesson: cur.lesson + 1, episodes: 0, rates: [], startFrame: framesDone, startEpisode: episode + 1 };
    }
    return { ...d, lesson, episodes: cur.episodes };
  }
}
