/**
 * kais train holds --load and a lesson's "load" to the per-frame request limit, as kais eval and
 * kais up hold --load (shared/scenario.ts checkLoad): a scenario at 2.5 M requests a frame runs at
 * load 2, not at 3.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { loadScenario } from '../../../../shared/scenario';
import { checkLessons, checkTrainOptions } from '../../../../training/jobs/train-options';
import type { Lesson } from '../../../../training/curriculum/schedule';
import { tmpDir } from '../../../support/tmp';

const dir = tmpDir('kais-train-load-');
const kais = loadScenario('kais');
const file = path.join(dir, 'fast.json');
fs.writeFileSync(file, JSON.stringify({ ...kais, workload: { ...kais.workload, ratePerS: 100_000 } }));
const fast = loadScenario(file);
const lesson: Lesson = {
  name: 'x',
  scenario: file,
  workload: 'p4',
  load: 3,
  episodeFrames: 1,
  orchestration: 'hpa',
  maxEpisodes: 1,
  promotion: { plateauEpisodes: 1, minImprovement: 0 },
  checkpointOut: 'x',
  source: 'x.json',
} as Lesson;

describe('kais train: the load times the scenario rate is held to the per-frame request limit', () => {
  it('--load', () => {
    const out = path.join(dir, 'out.db');
    expect(() => checkTrainOptions({ scenario: file, load: 3, out, curriculum: 'none' })).toThrow(
      /^--load: 3 x scenario \S+'s 2,500,000 requests per frame = 7,500,000, more than 5,000,000$/,
    );
    expect(() => checkTrainOptions({ scenario: file, load: 2, out, curriculum: 'none' })).not.toThrow();
    expect(fs.existsSync(out)).toBe(false);
  });

  it('a lesson\'s "load"', () => {
    expect(() => checkLessons([lesson], fast)).toThrow(/^x\.json: field "load": 3 x scenario \S+'s 2,500,000 requests per frame/);
    expect(() => checkLessons([{ ...lesson, load: 2 }], fast)).not.toThrow();
  });
});
