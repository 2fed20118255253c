/**
 * Input files a user hands to a command, mutated field by field (null, a wrong type, a negative,
 * zero, a huge number, an empty list, a missing field): every loader either accepts the file or
 * throws a UsageError (exit 2, one line naming the file), never anything else. This checks the
 * class (the loaders at the door), not single cases: scenario JSON, curriculum lessons, the
 * orchestrator config and its prediction file, the agent's targets file and kais node's fault list.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { UsageError } from '../../../shared/errors';
import { loadScenario, topologyOf } from '../../../shared/scenario';
import { validateFaults } from '../../../shared/faults';
import { loadCurriculum } from '../../../training/curriculum/schedule';
import { checkLessons } from '../../../training/jobs/train-options';
import { readConfig } from '../../../orchestrator/main';
import { readTargets } from '../../../agent/cli';
import { readPrediction } from '../../../orchestrator/prediction';

const ROOT = path.resolve(__dirname, '../../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-input-files-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

const BAD_VALUES: unknown[] = [null, 'x', -1, 0, 1e308, -1e308, 0.5, [], {}, true, [null], [{}]];

/** Every leaf and object of `doc` replaced by each bad value, and each key removed: [name, mutated doc]. */
function mutations(doc: unknown): [string, unknown][] {
  const out: [string, unknown][] = [];
  const walk = (node: unknown, at: (string | number)[]): void => {
    if (at.length > 0) {
      for (const v of BAD_VALUES) out.push([`${at.join('.')} = ${JSON.stringify(v)}`, setAt(doc, at, v)]);
      out.push([`${at.join('.')} removed`, setAt(doc, at, undefined)]);
    }
    if (node && typeof node === 'object') {
      for (const [k, v] of Object.entries(node)) walk(v, [...at, Array.isArray(node) ? Number(k) : k]);
    }
  };
  walk(doc, []);
  return out;
}

function setAt(doc: unknown, at: (string | number)[], value: unknown): unknown {
  const copy = JSON.parse(JSON.stringify(doc)) as Record<string | number, unknown>;
  let node = copy;
  for (const k of at.slice(0, -1)) node = node[k] as Record<string | number, unknown>;
  const last = at[at.length - 1];
  if (value === undefined) {
    if (Array.isArray(node)) node.splice(last as number, 1);
    else delete node[last];
  } else node[last] = value;
  return copy;
}

/** Runs `load` on each mutation written to a file; anything but success or a UsageError fails. */
function expectOnlyUsageErrors(base: unknown, load: (file: string) => void): void {
  const wrong: string[] = [];
  let n = 0;
  for (const [name, doc] of mutations(base)) {
    const file = path.join(dir, `m${n++}.json`);
    fs.writeFileSync(file, JSON.stringify(doc));
    try {
      load(file);
    } catch (e) {
      if (!(e instanceof UsageError)) wrong.push(`${name}: ${e instanceof Error ? `${e.name}: ${e.message}` : String(e)}`);
      else if (e.message.includes('\n')) wrong.push(`${name}: two lines: ${e.message}`);
    }
  }
  expect(wrong).toEqual([]);
}

const readJson = (p: string): unknown => JSON.parse(fs.readFileSync(path.join(ROOT, p), 'utf8'));

describe('input files mutated field by field: accepted or one UsageError', () => {
  it('scenario JSON (--scenario <file>)', () => {
    expectOnlyUsageErrors(readJson('shared/scenarios/tiny.json'), (file) => {
      const s = loadScenario(file);
      topologyOf(s);
    });
  });

  it('curriculum lessons (--curriculum <file>)', () => {
    const tiny = loadScenario('tiny');
    const lesson = { ...(readJson('training/curriculum/lessons/01-clone-lec.json') as object), scenario: 'tiny' };
    expectOnlyUsageErrors(lesson, (file) => checkLessons(loadCurriculum(file), tiny));
  });

  it('orchestrator config (--config <file>)', () => {
    const cfg = {
      scenario: 'tiny',
      orchestration: 'hpa',
      token: 't',
      agentTokens: { '0': 'a' },
      frameS: 25,
      speed: 1,
      executor: 'http://127.0.0.1:1',
      executorToken: 'x',
      heartbeatMs: 5000,
      actorHead: 'softplus1',
      learner: 'none',
      learnBatch: 2048,
      detector: 'none',
    };
    expectOnlyUsageErrors(cfg, (file) => readConfig(file));
  });

  it('the simulator\'s prediction of a run (orchestrator config "prediction")', () => {
    const prediction = {
      policy: 'lec/static',
      throughputRate: 0.77,
      frameS: 25,
      arrivedPerFrame: [812, 790, 10],
      completedInTimePerFrame: [601, 622, 40],
      startMs: 1_764_650_000_000,
    };
    expectOnlyUsageErrors(prediction, (file) => readPrediction(file));
  });

  it("the agent's targets file (--targets <file>)", () => {
    const targets = { nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'], cloud: 'http://127.0.0.1:4' };
    expectOnlyUsageErrors(targets, (file) => readTargets(file, 3));
  });

  it("kais node's fault list (--faults <json>)", () => {
    const faults = [{ node: 1, startS: 70, durationS: 30, precursorS: 20 }];
    expectOnlyUsageErrors(faults, (file) => {
      try {
        validateFaults(JSON.parse(fs.readFileSync(file, 'utf8')), 3);
      } catch (e) {
        // node-cli.ts turns any validateFaults error into a UsageError naming --faults; a plain TypeError is its contract
        if (!(e instanceof TypeError) && !(e instanceof UsageError) && !(e instanceof RangeError)) throw e;
      }
    });
  });
});
