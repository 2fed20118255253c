/**
 * scripts/train-gpg.ts as a process (the built dist/scripts/train-gpg.js): trace windows to train
 * and evaluate on (TRACES, EVAL_TRACE); a bad window exits 2 with one line before training, and
 * writes nothing.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expectUsageExit } from '../support/cli';

const SCRIPT = path.join(__dirname, '..', '..', 'dist', 'scripts', 'train-gpg.js');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-train-gpg-'));
const out = path.join(dir, 'gpg.json');

function run(env: Record<string, string>) {
  const r = spawnSync(process.execPath, [SCRIPT], {
    encoding: 'utf8',
    timeout: 120_000,
    env: { ...process.env, SCENARIO: 'tiny', UPDATES: '2', ROLLOUTS: '2', FRAMES: '2', EVAL_EVERY: '0', OUT: out, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** A made-up v2017 window (not trace rows). */
function window(name: string): string {
  const lines: string[] = [];
  for (let j = 0; j < 30; j++) lines.push(`${j * 4},${j * 4 + 9},${name}${j},${j},1,Terminated,60,0.01`);
  const f = path.join(dir, `${name}.csv`);
  fs.writeFileSync(f, lines.join('\n') + '\n');
  return f;
}

afterEach(() => fs.rmSync(out, { force: true }));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('train-gpg TRACES / EVAL_TRACE', () => {
  it('trains on the windows in turn and records them in the model', () => {
    const a = window('a');
    const b = window('b');
    const r = run({ TRACES: `${a},${b}`, EVAL_TRACE: a });
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`u=0 load 1 trace ${a}`);
    expect(r.stdout).toContain(`u=1 load 1 trace ${b}`);
    const model = JSON.parse(fs.readFileSync(out, 'utf8')) as { trainedWith: { traces: string[]; evalTrace: string } };
    expect(model.trainedWith.traces).toEqual([a, b]);
    expect(model.trainedWith.evalTrace).toBe(a);
  });

  it.each([
    [
      'TRACES',
      'a missing window',
      () => ({ TRACES: `${window('ok')},${path.join(dir, 'none.csv')}` }),
      /^train-gpg: TRACES: .*none\.csv does not exist\n$/,
    ],
    [
      'EVAL_TRACE',
      'a file that is not a trace',
      () => {
        const f = path.join(dir, 'bad.csv');
        fs.writeFileSync(f, 'hello,world\n');
        return { EVAL_TRACE: f };
      },
      /^train-gpg: EVAL_TRACE: /,
    ],
  ])('%s with %s exits 2 with one line and writes nothing', (_k, _what, env, problem) => {
    expectUsageExit(run(env()), problem, out);
  });
});
