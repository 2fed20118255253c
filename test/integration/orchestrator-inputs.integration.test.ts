/**
 * Issue 14, item 5: bad stores and configs are refused at start through the real CLI
 * (dist/kais.js, built by `npm test`): exit 2 and one line naming the file (or field) and the
 * problem, never a stack trace, and a refused file is left as it was.
 */
import { spawn } from 'node:child_process';
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import Database from 'better-sqlite3';
import { Store } from '../../orchestrator/store';

const ROOT = path.resolve(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');
const MODEL = path.join(ROOT, 'models', 'kais-cmmac.bin');

function kais(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [KAIS, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
    // a case that wrongly starts must not hang the test: it would print its ready line
    child.stdout!.on('data', () => {
      if (stdout.includes('"ready"')) child.kill('SIGKILL');
    });
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

const sha = (f: string) => crypto.createHash('sha256').update(fs.readFileSync(f)).digest('hex');
const esc = (s: string) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

describe('kais orchestrator refuses bad stores and configs at start', () => {
  let dir: string;
  beforeAll(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-orch-inputs-'))));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  const config = (name: string, cfg: unknown) => {
    const f = path.join(dir, name);
    fs.writeFileSync(f, JSON.stringify(cfg));
    return f;
  };

  it('exits 2 with one line for a corrupt, truncated, foreign or misplaced --db, leaving the file as it was', async () => {
    const cfg = config('ok.json', { scenario: 'tiny', learner: 'none', detector: 'none' });
    const corrupt = path.join(dir, 'corrupt.db');
    fs.writeFileSync(corrupt, crypto.randomBytes(8192));
    const foreign = path.join(dir, 'foreign.db');
    const f = new Database(foreign);
    f.exec('CREATE TABLE photos (id INTEGER PRIMARY KEY, jpeg BLOB)');
    f.close();
    // a real store with pages of experience, cut in half
    const truncated = path.join(dir, 'truncated.db');
    const s = Store.open(truncated);
    for (let i = 0; i < 50; i++) s.recordEvent({ kind: 'x', eap: null, session: null, message: 'y'.repeat(1000) });
    s.close();
    fs.truncateSync(truncated, Math.floor(fs.statSync(truncated).size / 2));
    const before = { corrupt: sha(corrupt), foreign: sha(foreign), truncated: sha(truncated) };
    const cases: [string, RegExp][] = [
      // (the flag's own check, shared/config.ts, or the store's: either says it is not SQLite)
      [corrupt, /^kais: --db: .*corrupt\.db:? (is )?not a SQLite database/],
      [foreign, /^kais: --db: .*foreign\.db: a SQLite database of something else \(tables photos\), not a kais orchestrator store$/],
      [
        truncated,
        /^kais: --db: .*truncated\.db: (corrupt or truncated SQLite database|not a usable SQLite database|cannot use as a store).*$/,
      ],
      [path.join(dir, 'no-such-folder', 'o.db'), /^kais: --db: (.*o\.db: )?folder .*no-such-folder does not exist$/],
    ];
    const runs = await Promise.all(cases.map(([db]) => kais(['orchestrator', '--config', cfg, '--db', db])));
    runs.forEach((r, i) => {
      const lines = r.stderr.trim().split('\n');
      expect({ db: cases[i][0], code: r.code, lines: lines.length }).toEqual({ db: cases[i][0], code: 2, lines: 1 });
      expect(lines[0]).toMatch(cases[i][1]);
    });
    expect({ corrupt: sha(corrupt), foreign: sha(foreign), truncated: sha(truncated) }).toEqual(before);
  });

  it('exits 2 with one line naming the field for out-of-range numbers and a checkpoint of another scenario', async () => {
    const cases: [unknown, RegExp][] = [
      [
        { scenario: 'tiny', heartbeatMs: 1e15 },
        /field "heartbeatMs" must be an integer number of ms in 100\.\.3600000, got 1000000000000000$/,
      ],
      [{ scenario: 'tiny', speed: 1e300 }, /field "speed" must be at most 1000, got 1e\+300$/],
      [{ scenario: 'tiny', speed: 500 }, /field "speed" makes a frame of 50\.000 ms .*; at least 100 ms$/],
      [{ scenario: 'tiny', limits: { experienceMaxMB: -1 } }, /field "limits\.experienceMaxMB" must be a positive number/],
      [{ scenario: 'tiny', intake: { floodsPerS: 3 } }, /field "intake\.floodsPerS" is not a field of intake/],
      [
        { scenario: 'tiny', learner: 'none', detector: 'none', checkpoint: MODEL },
        new RegExp(
          `^kais: checkpoint ${esc(MODEL)} holds an actor with \\d+ inputs and 41 actions; scenario tiny needs \\d+ inputs and 4 actions`,
        ),
      ],
    ];
    const runs = await Promise.all(
      cases.map(([cfg], i) => kais(['orchestrator', '--config', config(`bad-${i}.json`, cfg), '--db', path.join(dir, `fresh-${i}.db`)])),
    );
    runs.forEach((r, i) => {
      const lines = r.stderr.trim().split('\n');
      expect({ case: cases[i][0], code: r.code, lines: lines.length }).toEqual({ case: cases[i][0], code: 2, lines: 1 });
      expect(lines[0]).toMatch(cases[i][1]);
    });
    // refused before the store was created
    expect(fs.existsSync(path.join(dir, 'fresh-5.db'))).toBe(false);
  });

  it('refuses config fields that could not work or would be ignored, naming the file and the field, and creates no store', async () => {
    const k8s = { KUBERNETES_SERVICE_HOST: '' };
    // the shipped GPG model naming a light actor that is not in its folder
    const noLight = path.join(dir, 'no-light.json');
    const shipped = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'models', 'kais-gpg.json'), 'utf8')) as {
      scaleIn: { light: { actor: string } };
    };
    shipped.scaleIn.light.actor = 'absent.bin';
    fs.writeFileSync(noLight, JSON.stringify(shipped));
    const cases: [unknown, RegExp][] = [
      [{ scenario: 'nope' }, /: field "scenario" unknown scenario "nope"/],
      [{ scenario: 'tiny', agentTokens: { 999: 'abc' } }, /field "agentTokens\.999" names no eAP of scenario tiny \(eAPs 0\.\.0\)$/],
      [{ scenario: 'tiny', agentTokens: { 0: ' ' } }, /field "agentTokens\.0" is empty/],
      [{ scenario: 'tiny', agentTokens: ['abc'] }, /field "agentTokens" must be an object/],
      [{ scenario: 'tiny', executorToken: 'x' }, /field "executorToken" is read only with an executor URL/],
      [{ scenario: 'tiny', gpgModel: MODEL }, /field "gpgModel" is read only with orchestration "gpg" \(this config: "static"\)$/],
      [
        { scenario: 'tiny', learner: 'none', injectBadWeightsAfterS: 5 },
        /field "injectBadWeightsAfterS" needs "learner": "cmmac" or a canary/,
      ],
      [{ scenario: 'tiny', executor: 'http://exa mple' }, /field "executor" must be an http:\/\/ URL/],
      [{ scenario: 'tiny', adminToken: ' '.repeat(16) }, /field "adminToken" must be printable ASCII without spaces/],
      [{ scenario: 'tiny', checkpoint: dir }, /field "checkpoint" \S+ is not a file$/],
      [{ scenario: 'tiny', executor: 'kubernetes', kubernetes: { kubeconfig: dir } }, /field "kubernetes\.kubeconfig" \S+ is not a file$/],
      [
        { scenario: 'tiny', executor: 'kubernetes' },
        /field "kubernetes\.kubeconfig" is null \(in-cluster\), but this process runs outside a pod/,
      ],
      // found when the model is read (tfjs), still before the store
      [
        { scenario: 'kais', orchestration: 'gpg', gpgModel: MODEL, learner: 'none', detector: 'none' },
        /^kais: --config \S+bad-cfg-12\.json: field "gpgModel": \S+: not JSON/,
      ],
      [
        { scenario: 'kais', orchestration: 'gpg', gpgModel: noLight, learner: 'none', detector: 'none' },
        /field "gpgModel": \S+no-light\.json: its light actor \S+absent\.bin does not exist$/,
      ],
    ];
    const runs = await Promise.all(
      cases.map(([cfg], i) =>
        kais(['orchestrator', '--config', config(`bad-cfg-${i}.json`, cfg), '--db', path.join(dir, `cfg-${i}.db`)], k8s),
      ),
    );
    runs.forEach((r, i) => {
      const lines = r.stderr.trim().split('\n');
      expect({ case: cases[i][0], code: r.code, lines: lines.length }).toEqual({ case: cases[i][0], code: 2, lines: 1 });
      expect(lines[0]).toMatch(cases[i][1]);
      expect(fs.existsSync(path.join(dir, `cfg-${i}.db`))).toBe(false);
    });
  });

  it("refuses a store that holds another scenario's state", async () => {
    const db = path.join(dir, 'bound.db');
    const s = Store.open(db);
    expect(s.bindScenario('kais (30 services x 40 nodes)')).toBeNull();
    s.close();
    const r = await kais([
      'orchestrator',
      '--config',
      config('tiny-on-kais.json', { scenario: 'tiny', learner: 'none', detector: 'none' }),
      '--db',
      db,
    ]);
    expect(r.code).toBe(2);
    expect(r.stderr.trim()).toMatch(
      /^kais: --db \S+bound\.db: holds the state of scenario kais \(30 services x 40 nodes\); this config runs tiny \(use another --db\)$/,
    );
  });
});
