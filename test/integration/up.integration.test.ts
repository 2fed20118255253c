/**
 * `kais up` through the real CLI (dist/kais.js, built by `npm test`): real processes on ephemeral
 * loopback ports (emulated cluster, orchestrator, one agent per eAP) and the load generator.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { tmpDir } from '../support/tmp';
import { alive } from '../support/wait';
import { ORCHESTRATOR_NICE } from '../../launcher/up';
import { Store } from '../../orchestrator/store';

const ROOT = path.resolve(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const running = new Set<ChildProcess>();

afterEach(() => {
  // a failed expectation must not leave kais up (and, through it, its children) running
  for (const c of running) c.kill('SIGKILL');
  running.clear();
});

function kaisUp(
  args: string[],
  onStderrLine: (line: string, child: ChildProcess) => void = () => undefined,
  env: NodeJS.ProcessEnv = process.env,
): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [KAIS, 'up', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
    running.add(child);
    let stdout = '';
    let stderr = '';
    let partial = '';
    child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr!.on('data', (c: Buffer) => {
      stderr += c.toString();
      partial += c.toString();
      const lines = partial.split('\n');
      partial = lines.pop()!;
      for (const line of lines) onStderrLine(line, child);
    });
    child.on('exit', (code) => {
      running.delete(child);
      resolve({ code, stdout, stderr });
    });
  });
}

/** The JSON summary `kais up --json` prints last. */
const summaryOf = (run: Run): Record<string, unknown> => JSON.parse(run.stdout.trim().split('\n').pop()!) as Record<string, unknown>;

/** One kais command (status, scale, ...) to its end. */
function cli(args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const c = spawn(process.execPath, [KAIS, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout!.on('data', (b: Buffer) => (stdout += b.toString()));
    c.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    c.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * Listens on 127.0.0.1:port as soon as it is free (a SIGKILLed process's port is freed as it dies:
 * retried on EADDRINUSE until then); answers every request 418, so nobody mistakes it for the orchestrator.
 */
async function occupy(port: number, ms = 10_000): Promise<http.Server> {
  const end = Date.now() + ms;
  for (;;) {
    const s = http.createServer((_req, res) => {
      res.statusCode = 418;
      res.end('not the orchestrator');
    });
    const err = await new Promise<NodeJS.ErrnoException | null>((resolve) => {
      s.once('error', resolve);
      s.listen(port, '127.0.0.1', () => resolve(null));
    });
    if (!err) return s;
    if (err.code !== 'EADDRINUSE' || Date.now() > end) throw err;
    await new Promise((r) => setTimeout(r, 20));
  }
}

function pidsIn(stderr: string): number[] {
  return [...stderr.matchAll(/pids? ?=?([\d ]+)/g)].flatMap((m) => m[1].trim().split(/\s+/).map(Number)).filter((p) => p > 0);
}

function expectAccounted(s: Record<string, unknown>): void {
  const n = (k: string) => s[k] as number;
  expect(n('sent')).toBeGreaterThan(100);
  expect(n('completedInTime') + n('late') + n('refused') + n('unanswered')).toBe(n('sent'));
  expect(n('unanswered')).toBe(0);
  const perEap = s.perEap as Record<string, number>[];
  expect(perEap).toHaveLength(5);
  expect(perEap.reduce((a, e) => a + e.sent, 0)).toBe(n('sent'));
  for (const e of perEap) expect(e.completedInTime + e.late + e.refused + e.unanswered).toBe(e.sent);
}

describe('kais up', () => {
  it('accounts for every request it sent in 10 s and leaves no process behind', async () => {
    const run = await kaisUp(['--duration', '10', '--json']);
    expect(run.code).toBe(0);
    // the default (gpg placement on kais) runs the argmax actor kais-cmmac.bin
    expect(run.stderr).toMatch(/using the shipped model \S*kais-cmmac\.bin/);
    const s = summaryOf(run);
    expectAccounted(s);
    expect(s.durationS).toBe(10);
    expect(s.policy).toBe('cmmac');
    expect(s.cmmacAct).toBeUndefined();
    expect(s.evalPolicy).toBe('cmmac/gpg'); // both shipped kais models by default
    // the summary says what the GPG model ran: the shipped file, its gated scale-in and its actor switch
    expect(s.orchestration).toMatch(
      /^gpg \S*kais-gpg\.json: \d+ nodes a decision, then hpa's scale-in \(.*no removal above a failed share of 0\.3, .*\); actor switch: kais-cmmac-drawn\.bin dispatches in the first frame/,
    );
    // the actor switch live: 10 s is within the first frame (25 s), which the placement names light, so
    // every decision of every agent is the light actor's (the weights carry it beside the main one), by
    // argmax: nothing is drawn (--explore 0.25 draws where the main actor decides, what the learner learns)
    for (const e of s.perEap as { decisionsLearned: number; decisionsLight: number; decisionsDrawn: number }[]) {
      expect(e.decisionsLearned).toBeGreaterThan(0);
      expect(e.decisionsLight).toBe(e.decisionsLearned);
      expect(e.decisionsDrawn).toBe(0);
    }
    // so nothing reached the online learner, and the summary says so (read from the orchestrator's admin status)
    expect(s.learner).toEqual({ transitionsRead: 0, updates: 0, published: 0 });
    expect(s.completedInTime as number).toBeGreaterThan(0);
    expect(s.placementVersionsApplied as number).toBeGreaterThanOrEqual(1);
    expect(s.nodeExclusions).toBe(0); // no failures played: QoS isolation must not fire on a healthy cluster
    expect(s.faults).toBeNull();
    // the diagnostics beside live / predicted: shares in [0, 1], the decisions' cloud share counted from every agent
    for (const k of ['cloudShare', 'evalCloudShare', 'refusedShare', 'evalDroppedShare']) {
      expect(s[k] as number).toBeGreaterThanOrEqual(0);
      expect(s[k] as number).toBeLessThanOrEqual(1);
    }
    expect(s.cloudShare as number).toBeGreaterThan(0); // kais at load 1 sends a share to the cloud
    expect((s.perEap as { decidedToCloud: number }[]).every((e) => Number.isInteger(e.decidedToCloud))).toBe(true);
    const pids = pidsIn(run.stderr);
    expect(pids.length).toBeGreaterThanOrEqual(7); // cluster, orchestrator, 5 agents
    expect(pids.filter(alive)).toEqual([]);
  }, 60_000);

  it('a scenario file that takes a built-in name with another topology runs lec, saying why (the shipped model for that name does not fit it)', async () => {
    const file = path.join(tmpDir('kais-up-name-'), 'kais.json');
    const tiny = JSON.parse(fs.readFileSync(path.join(ROOT, 'shared', 'scenarios', 'tiny.json'), 'utf8')) as Record<string, unknown>;
    fs.writeFileSync(file, JSON.stringify({ ...tiny, name: 'kais' }));
    const run = await kaisUp(['--scenario', file, '--duration', '1', '--json']);
    expect(run.code).toBe(0);
    expect(run.stderr).toMatch(
      /the model shipped for "kais" \(\S+kais-cmmac\.bin\) was trained on another version of it: not used; the agents dispatch with their fallback, lec/,
    );
    const s = summaryOf(run);
    expect([s.learning, s.evalPolicy]).toEqual([false, 'lec/static']);
  });

  it('deploys a model whose act is sample sampling: every agent draws every decision from the policy, and the prediction samples too', async () => {
    // the shipped actor fine-tuned on GPG's placement, exported by kais train --eval-act sample (an opt-in since session 25);
    // on the GPG model without the actor switch: under the shipped one the first frame is the light
    // actor's, by argmax, and the sampling model would decide nothing in 5 s
    // 5 s runs (10 s until session 54): every eAP decides hundreds of requests in 5 s
    const run = await kaisUp([
      '--duration',
      '5',
      '--no-learn',
      '--gate',
      '--canary',
      '--json',
      '--gpg',
      path.join(ROOT, 'models', 'kais-gpg-gate.json'),
      '--checkpoint',
      path.join(ROOT, 'models', 'kais-cmmac-gpg.bin'),
    ]);
    expect(run.code).toBe(0);
    expect(run.stderr).not.toMatch(/using the shipped model/);
    // what needs learning is said to be ignored with --no-learn (it was dropped in silence)
    expect(run.stderr).toMatch(/ignored: --gate \(nothing is learned: --no-learn\), --canary \(nothing new is published\)$/m);
    const s = summaryOf(run);
    expectAccounted(s);
    expect(s.cmmacAct).toBe('sample');
    expect(s.learning).toBe(false);
    const perEap = s.perEap as { decisionsLearned: number; decisionsDrawn: number }[];
    for (const e of perEap) {
      expect(e.decisionsLearned).toBeGreaterThan(0);
      expect(e.decisionsDrawn).toBe(e.decisionsLearned);
    }
    expect(run.stderr).toMatch(/the model acts by sampling \(act: sample\)/);
    // the same weights without act (argmax): nothing drawn, no cmmacAct, and another prediction
    const model = path.join(tmpDir('kais-up-act-'), 'argmax.bin');
    fs.copyFileSync(path.join(ROOT, 'models', 'kais-cmmac-gpg.bin'), model);
    const meta = JSON.parse(fs.readFileSync(path.join(ROOT, 'models', 'kais-cmmac-gpg.bin.json'), 'utf8')) as Record<string, unknown>;
    delete meta.act;
    fs.writeFileSync(`${model}.json`, JSON.stringify(meta));
    const argmax = await kaisUp([
      '--duration',
      '5',
      '--gpg',
      path.join(ROOT, 'models', 'kais-gpg-gate.json'),
      '--checkpoint',
      model,
      '--no-learn',
      '--json',
    ]);
    expect(argmax.code).toBe(0);
    const t = summaryOf(argmax);
    expect(t.cmmacAct).toBeUndefined();
    expect((t.perEap as { decisionsDrawn: number }[]).every((e) => e.decisionsDrawn === 0)).toBe(true);
    // another prediction: the sends per target differ (the gpg actors sample close to their argmax: with
    // session 27's the two 10 s predictions' throughput rates agreed to 4 decimals, 0.8882)
    const predicted = (r: Record<string, unknown>) => (r.perTarget as { predicted: { sent: number } }[]).map((p) => p.predicted.sent);
    expect(predicted(t)).toHaveLength(predicted(s).length);
    expect(predicted(t)).not.toEqual(predicted(s));
  }, 90_000);

  it('--guard with --guard-* flags: every agent runs that guard, and the prediction is cmmac behind it', async () => {
    const guard = [
      '--guard',
      '--guard-enter',
      '0.3',
      '--guard-exit',
      '0.2',
      '--guard-mid',
      'none',
      '--guard-spread',
      'p2c',
      '--guard-spread-to',
      '0.5',
    ];
    const run = await kaisUp(['--duration', '5', '--no-learn', '--json', '--verbose', ...guard]);
    expect(run.code).toBe(0);
    const s = summaryOf(run);
    expect(s.evalPolicy).toMatch(/^cmmac\+guard\//);
    // each agent logs its guard at start (agent/main.ts, guardSummary): round-robin from 0.3, no lec level, a p2c spreading share
    const said = [...run.stderr.matchAll(/^\[agent (\d+)\] regime guard: (.*)$/gm)].map((m) => [Number(m[1]), m[2]] as const);
    expect(said.map(([b]) => b).sort()).toEqual([0, 1, 2, 3, 4]);
    for (const [, line] of said)
      expect(line).toBe(
        'round-robin from a late share of 0.3 (back at 0.2); p2c takes a share rising to 1 between late shares 0.2 and 0.5; half-life 200 decisions, dwell 200',
      );
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
  }, 60_000);

  it('runs a heuristic policy in every agent and in the prediction, and names it (--policy jsq, tiny, 5 s)', async () => {
    const kept = path.join(tmpDir('kais-up-store-'), 'run.db');
    const run = await kaisUp([
      '--scenario',
      'tiny',
      '--duration',
      '5',
      '--policy',
      'jsq',
      '--guard',
      '--canary',
      '--json',
      '--verbose',
      '--keep-store',
      kept,
    ]);
    expect(run.code).toBe(0);
    // --keep-store: the orchestrator's store outlives the run folder, whole (its placements and the agents' telemetry)
    expect(run.stderr).toContain(`kais up: kept the orchestrator's store: ${kept}\n`);
    expect(summaryOf(run).keptStore).toBe(kept);
    const store = Store.open(kept, { readonly: true, log: () => undefined });
    try {
      expect(store.metrics('agent/requests').length).toBeGreaterThan(2);
      expect(store.latestPlacementVersion()).not.toBeNull();
    } finally {
      store.close();
    }
    // what only a learned policy uses is said to be ignored
    expect(run.stderr).toMatch(/--policy jsq: every agent dispatches with jsq; .* \(--guard, --canary ignored\)/);
    expect(run.stderr).toMatch(/^\[agent 0\] warn: policy jsq: every decision is jsq's, actor weights are ignored, --guard is ignored/m);
    const s = summaryOf(run);
    const n = (k: string) => s[k] as number;
    expect(s.policy).toBe('jsq');
    expect(s.evalPolicy).toBe('jsq/static');
    expect(s.orchestration).toBe('static'); // no GPG ships for tiny
    expect(s.learning).toBe(false);
    expect(n('sent')).toBeGreaterThan(10);
    expect(n('unanswered')).toBe(0);
    expect(n('completedInTime') + n('late') + n('refused')).toBe(n('sent'));
    expect(n('weightVersionsApplied')).toBe(0); // no model published, none used
    for (const e of s.perEap as Record<string, unknown>[]) {
      expect(e.policy).toBe('jsq');
      expect(e.decisionsLearned).toBe(0);
      // every decision is jsq's (a request that expired in the eAP queue was never decided)
      expect(e.decisionsFallback as number).toBeGreaterThan(0);
      expect(e.decisionsFallback as number).toBeLessThanOrEqual(e.sent as number);
    }
    expect(run.stderr).toMatch(/--policy jsq: every agent dispatches with jsq/);
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
  }, 60_000);

  it("runs the learned orchestration live (--orchestration gpg): every frame's placement reaches every agent", async () => {
    // an untrained (seeded) model: what is checked is the wiring, not the quality
    const { GpgNet } = await import('../../critic/gpg/gnn');
    const { gpgModelToJson } = await import('../../critic/gpg/model');
    const file = path.join(tmpDir('kais-gpg-'), 'tiny-gpg.json');
    const net = new GpgNet(4, 3, { hidden: [8], headHidden: [16], embed: 4 });
    fs.writeFileSync(file, gpgModelToJson(net, { scenario: 'tiny' }));
    net.dispose();
    // tiny's frame is 25 scenario s: at speed 10 a decision every 2.5 s
    const run = await kaisUp(
      [
        '--scenario',
        'tiny',
        '--orchestration',
        'gpg',
        '--gpg',
        file,
        '--speed',
        '10',
        '--duration',
        '8',
        '--policy',
        'lec',
        '--json',
        '--verbose',
      ],
      undefined,
      // tokens in the operator's shell are not the run's: inherited by the node, this one made it
      // refuse every placement step (401), and the run still ended 0 with one placement applied
      {
        ...process.env,
        KAIS_NODE_ADMIN_TOKEN: 'shell-node-token-1234',
        KAIS_AGENT_TOKEN: 'shell-agent-token-1234',
        KAIS_ADMIN_TOKEN: 'shell-admin-token-1234',
      },
    );
    expect(run.code).toBe(0);
    const s = summaryOf(run);
    expect(s.evalPolicy).toBe('lec/gpg');
    // the orchestrator says what it runs: the model file, H and its scale-in (none in this file)
    expect(run.stderr).toMatch(/^kais up: orchestration: gpg .*tiny-gpg\.json: 2 nodes a decision, no scale-in$/m);
    expect(run.stderr).toMatch(/^\[orchestrator\] .*orchestration: gpg .*tiny-gpg\.json: 2 nodes a decision, no scale-in$/m);
    expect(s.orchestration).toMatch(/^gpg .*tiny-gpg\.json: 2 nodes a decision, no scale-in$/);
    expect(s.unanswered).toBe(0);
    expect(s.placementVersionsApplied as number).toBeGreaterThanOrEqual(3);
    // step by step against the simulator's: the same start placement (one initial placement), then every step the run reached
    const steps = s.placementVsPredicted as { frame: number; replicasDiffering: number }[];
    expect(steps[0]).toEqual({ frame: 0, replicasDiffering: 0 });
    expect(steps.length).toBeGreaterThanOrEqual(3);
    expect(steps.map((p) => p.frame)).toEqual(steps.map((_, k) => k));
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
    const missing = await kaisUp(['--scenario', 'tiny', '--orchestration', 'gpg', '--duration', '5']);
    expect(missing.code).toBe(2);
    expect(missing.stderr.trim().split('\n')).toHaveLength(1);
    expect(missing.stderr).toMatch(/--orchestration gpg: needs --gpg/);
  }, 90_000);

  it('kais scale during kais up: the placement that follows has the replicas and every agent applies it', async () => {
    let checked: Promise<void> | null = null;
    const run = await kaisUp(['--scenario', 'tiny', '--duration', '20', '--policy', 'lec', '--json'], (line, child) => {
      const m = /admin: kais status --orchestrator (\S+) --admin-token-file (\S+)/.exec(line);
      if (!m || checked) return;
      const admin = ['--orchestrator', m[1], '--admin-token-file', m[2], '--json'];
      checked = (async () => {
        const r = await cli(['scale', ...admin, '--service', '1', '--replicas', '3', '--reason', 'test', '--by', 'jest']);
        expect(r.code).toBe(0);
        const v = JSON.parse(r.stdout).placementVersion as number;
        // wait for the event: every agent acknowledges a placement version at least v
        for (;;) {
          const st = JSON.parse((await cli(['status', ...admin])).stdout) as {
            placement: number[][];
            agents: { placementVersion: number | null }[];
          };
          expect(st.placement[1].reduce((a, b) => a + b, 0)).toBe(3);
          if (st.agents.length === 1 && st.agents.every((a) => (a.placementVersion ?? 0) >= v)) break;
          await new Promise((res) => setTimeout(res, 200));
        }
        const bad = await cli(['scale', ...admin, '--service', '99', '--replicas', '1', '--reason', 'x']);
        expect(bad.code).toBe(2);
        expect(bad.stderr.trim().split('\n')).toHaveLength(1);
        // the API's field is named by the flag that carried it
        expect(bad.stderr).toMatch(/^kais: --service: must be an integer in 0\.\.3/);
        const zero = await cli(['scale', ...admin, '--service', '1', '--replicas', '0', '--reason', 'x']);
        expect(zero.stderr).toMatch(/^kais: --replicas: must be an integer in 1\.\.\d+/);
        child.kill('SIGINT'); // done: a partial summary is enough
      })();
    });
    expect(checked).not.toBeNull();
    await checked;
    expect(run.code).toBe(130);
  }, 90_000);

  it('runs end to end over wss:// and https:// with --tls; the admin CLI needs the certificate to talk to it', async () => {
    let checked: Promise<void> | null = null;
    let orchestratorUrl = '';
    const run = await kaisUp(['--scenario', 'small', '--duration', '6', '--policy', 'lec', '--tls', '--json'], (line) => {
      orchestratorUrl ||= /orchestrator pid=\d+ url=(\S+)/.exec(line)?.[1] ?? '';
      const m = /admin: kais status --orchestrator (https:\S+) --admin-token-file (\S+) --tls-ca (\S+)/.exec(line);
      if (!m || checked) return;
      checked = (async () => {
        const ok = await cli(['status', '--orchestrator', m[1], '--admin-token-file', m[2], '--tls-ca', m[3], '--json']);
        expect(ok.code).toBe(0);
        expect(JSON.parse(ok.stdout)).toHaveProperty('placement');
        // without the run's certificate: not trusted, one line, exit 2
        const untrusted = await cli(['status', '--orchestrator', m[1], '--admin-token-file', m[2]]);
        expect(untrusted.code).toBe(2);
        expect(untrusted.stderr.trim().split('\n')).toHaveLength(1);
        expect(untrusted.stderr).toMatch(/cannot reach it \(self-signed certificate/);
      })();
    });
    expect(checked).not.toBeNull();
    await checked;
    expect(orchestratorUrl).toMatch(/^wss:\/\//);
    expect(run.code).toBe(0);
    const s = summaryOf(run);
    expect(s).toMatchObject({ tls: true, unanswered: 0 });
    expect(s.completedInTime as number).toBeGreaterThan(0);
    expect((s.perEap as { placementVersion: number | null }[]).every((e) => e.placementVersion !== null)).toBe(true);
  }, 90_000);

  it('prints a partial summary of what ran so far on Ctrl-C, exits 130 and leaves no process behind', async () => {
    let interrupted = false;
    let again = false;
    let runDir = '';
    const run = await kaisUp(['--scenario', 'tiny', '--duration', '60', '--policy', 'jsq'], (line, child) => {
      // the run's temporary folder (the admin token is there)
      const d = /--admin-token-file (\S+)\/admin-token/.exec(line);
      if (d) runDir = d[1];
      // the first live line with requests sent: Ctrl-C
      if (!interrupted && /t=\d+s sent=[1-9]/.test(line)) {
        interrupted = true;
        // Ctrl-C again as soon as the partial summary shows, while the processes stop: it must not cut the cleanup short
        child.stdout!.once('data', () => {
          again = child.kill('SIGINT');
        });
        child.kill('SIGINT');
      }
    });
    expect(interrupted).toBe(true);
    expect(again).toBe(true);
    expect(run.code).toBe(130);
    expect(runDir).toMatch(/kais-up-/);
    expect(fs.existsSync(runDir)).toBe(false);
    const m =
      /^kais up: interrupted after ([\d.]+) s of 60 s \(tiny, p4, speed 1, policy jsq\)\nsent (\d+): in time (\d+), late \d+, refused \d+, unanswered \d+, still open \d+; throughput rate so far ([\d.]+)% \(kais eval predicts jsq\/static [\d.]+% for the whole run\)\n$/.exec(
        run.stdout,
      );
    expect(m).not.toBeNull();
    const [elapsed, sent, inTime, rate] = m!.slice(1).map(Number);
    expect(elapsed).toBeGreaterThan(1);
    expect(elapsed).toBeLessThan(60);
    expect(sent).toBeGreaterThan(0);
    expect(rate).toBeCloseTo((100 * inTime) / sent, 1);
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
  }, 60_000);

  it('on Ctrl-C during the prediction (before any process starts): the partial summary as JSON with what is known, exit 130', async () => {
    let interrupted = false;
    // the shipped model's line comes just before the prediction, which takes seconds on kais
    const run = await kaisUp(['--duration', '60', '--json'], (line, child) => {
      if (!interrupted && /using the shipped model/.test(line)) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    expect(interrupted).toBe(true);
    expect(run.code).toBe(130);
    const s = summaryOf(run);
    expect(s).toMatchObject({
      interrupted: true,
      beforeLoad: true,
      elapsedS: 0,
      durationS: 60,
      scenario: 'kais',
      workload: 'p4',
      speed: 1,
      policy: 'cmmac',
      sent: 0,
      open: 0,
    });
    expect(s.evalPolicy === null || s.evalPolicy === 'cmmac/gpg').toBe(true);
    expect(pidsIn(run.stderr)).toEqual([]); // nothing was started
  }, 60_000);

  it('reports a child that died (exit line, childExits, agent down) and restarts the orchestrator on its HTTP port', async () => {
    let httpPort = 0;
    let orchestratorPid = -1;
    let agentPid = -1;
    let healthz: Promise<number | string> | null = null;
    const run = await kaisUp(['--scenario', 'tiny', '--policy', 'jsq', '--duration', '8', '--json'], (line) => {
      const h = /admin: kais status --orchestrator http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
      if (h && httpPort === 0) httpPort = Number(h[1]);
      const o = /orchestrator pid=(\d+)/.exec(line);
      if (o && orchestratorPid < 0) orchestratorPid = Number(o[1]);
      const g = /agents up \(pids (\d+)/.exec(line);
      if (g) {
        agentPid = Number(g[1]);
        process.kill(agentPid, 'SIGKILL');
        process.kill(orchestratorPid, 'SIGKILL');
      }
      // the restarted orchestrator answers on the HTTP port the admin and dashboard lines named
      if (/back on ws:/.test(line) && healthz === null) {
        healthz = new Promise((resolve) => {
          http
            .get(`http://127.0.0.1:${httpPort}/healthz`, (res) => {
              res.resume();
              resolve(res.statusCode ?? 0);
            })
            .on('error', (e) => resolve(e.message));
        });
      }
    });
    // the agent did not come back: exit 3, with a line naming it (the orchestrator was restarted)
    expect(run.code).toBe(3);
    expect(run.stderr).toMatch(/kais up: agent 0 exited during the run and did not come back \(childExits\): exit 3\n/);
    expect(httpPort).toBeGreaterThan(0);
    expect(healthz).not.toBeNull();
    expect(await healthz!).toBe(200);
    // no model with --policy jsq: no weight version, said as v-
    expect(run.stderr).toMatch(/back on ws:\/\/\S+ \(weights v-, placement v\d+, resumed true\)/);
    expect(run.stderr).toMatch(new RegExp(`agent 0 \\(pid ${agentPid}\\) exited \\(SIGKILL(: .+)?\\); not restarted`));
    expect(run.stderr).toMatch(/rate per eAP down/);
    const s = summaryOf(run);
    expect(s.orchestratorRestarts).toBe(1);
    const exits = s.childExits as { name: string; pid: number; signal: string | null }[];
    expect(exits).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ name: 'agent 0', pid: agentPid, signal: 'SIGKILL' }),
        expect.objectContaining({ name: 'orchestrator', pid: orchestratorPid, signal: 'SIGKILL' }),
      ]),
    );
    expect(exits).toHaveLength(2);
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
  }, 60_000);

  it('restarts the orchestrator on a free HTTP port when its own was taken meanwhile, and names the new one', async () => {
    // kais up is held (SIGSTOP) while its orchestrator is SIGKILLed and its HTTP port is taken by
    // another listener, then let go (SIGCONT): the restart finds the port taken whatever the machine's speed
    let httpPort = 0;
    let orchestratorPid = -1;
    const adminPorts: number[] = [];
    const dashboardPorts: number[] = [];
    let blocker: http.Server | null = null;
    let taken: Promise<void> | null = null;
    let metrics: Promise<{ status: number; text: string } | string> | null = null;
    let answered = false;
    let stopped = false;
    try {
      // a long run, ended by Ctrl-C once the new port has answered: no race with the run's end on a busy machine
      const run = await kaisUp(['--scenario', 'tiny', '--policy', 'jsq', '--duration', '300', '--json'], (line, child) => {
        const h = /admin: kais status --orchestrator http:\/\/127\.0\.0\.1:(\d+)/.exec(line);
        if (h) adminPorts.push(Number(h[1]));
        if (h && httpPort === 0) httpPort = Number(h[1]);
        const d = /dashboard: http:\/\/127\.0\.0\.1:(\d+)\/dashboard/.exec(line);
        if (d) dashboardPorts.push(Number(d[1]));
        const o = /orchestrator pid=(\d+)/.exec(line);
        if (o && orchestratorPid < 0) orchestratorPid = Number(o[1]);
        if (/agents up/.test(line) && taken === null && orchestratorPid > 0 && httpPort > 0) {
          taken = (async () => {
            process.kill(child.pid!, 'SIGSTOP');
            try {
              process.kill(orchestratorPid, 'SIGKILL');
              blocker = await occupy(httpPort);
            } finally {
              process.kill(child.pid!, 'SIGCONT');
            }
          })();
        }
        // the new admin line: the port it names answers as the orchestrator (its metrics)
        if (h && adminPorts.length === 2) {
          metrics = new Promise((resolve) => {
            http
              .get(`http://127.0.0.1:${h[1]}/metrics`, (res) => {
                let text = '';
                res.on('data', (c: Buffer) => (text += c.toString()));
                res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
              })
              .on('error', (e) => resolve(e.message));
          }).then((answer) => {
            answered = true;
            return answer;
          });
        }
        // Ctrl-C once the new port has answered and requests are being sent
        if (answered && !stopped && /t=\d+s sent=[1-9]/.test(line)) {
          stopped = true;
          child.kill('SIGINT');
        }
      });
      await taken;
      expect(run.code).toBe(130);
      expect(httpPort).toBeGreaterThan(0);
      expect(blocker).not.toBeNull();
      // the first restart (same HTTP port) refused to start, the fallback said so, then a free port
      expect(run.stderr).toMatch(
        new RegExp(
          `orchestrator could not take its HTTP port again \\(.*--http-port: ${httpPort} is already in use.*\\); restarting it on a free one`,
        ),
      );
      expect(run.stderr).toMatch(
        new RegExp(`orchestrator exited \\(2: .*--http-port: ${httpPort} is already in use\\); restarting in 2 s on port \\d+`),
      );
      expect(run.stderr).not.toMatch(/restart failed/); // its exit said it all
      expect(run.stderr).toMatch(/back on ws:\/\/\S+ \(weights v-, placement v\d+, resumed true\)/);
      // the admin and dashboard lines again, naming the new port
      expect(adminPorts).toHaveLength(2);
      expect(dashboardPorts).toHaveLength(2);
      expect(dashboardPorts[0]).toBe(httpPort);
      const newPort = adminPorts[1];
      expect(newPort).not.toBe(httpPort);
      expect(dashboardPorts[1]).toBe(newPort);
      expect(run.stderr.indexOf(`dashboard: http://127.0.0.1:${newPort}/dashboard`)).toBeGreaterThan(
        run.stderr.indexOf('orchestrator could not take its HTTP port again'),
      );
      // it answered there as the orchestrator
      expect(metrics).not.toBeNull();
      const m = await metrics!;
      expect(typeof m === 'string' ? m : m.status).toBe(200);
      expect(typeof m === 'string' ? m : m.text).toMatch(/^# TYPE kais_orchestrator_\w+ (counter|gauge)$/m);
      // the summary (partial: Ctrl-C ended the run): two restarts, the SIGKILL and the refused start among the exits
      const s = summaryOf(run);
      expect(s.interrupted).toBe(true);
      expect(s.orchestratorRestarts).toBe(2);
      expect(s.childExits).toEqual([
        expect.objectContaining({ name: 'orchestrator', pid: orchestratorPid, signal: 'SIGKILL' }),
        expect.objectContaining({ name: 'orchestrator', code: 2, signal: null }),
      ]);
      expect(s.sent).toBeGreaterThan(0);
      expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
    } finally {
      await new Promise<void>((resolve) => (blocker ? blocker.close(() => resolve()) : resolve()));
    }
  }, 90_000);

  it('learns online: the orchestrator publishes new weight versions that the agents apply', async () => {
    // every decision explored, so a short run fills the batches. The run waits for the event, not a
    // duration: once every agent's progress line shows a learned version (v2 or later), it is
    // interrupted (the learner's first update lands in about a second on a quiet machine, later on a
    // busy one; a fixed 15 s run missed it once). --duration is only the bound on the wait: the
    // orchestrator runs niced below the agents, so on a busy machine its learner is starved first (with
    // three CPU hogs beside it, updates took 17-22 s and v2 landed at t=74 s; an 80 s bound failed a CI run).
    // So the run is at half speed: 180 s of scenario time bound the wait to 360 s of wall time (240 s
    // until a CI run of session 54 on a slow machine missed it), the agents take half the CPU they
    // would at speed 1, and the prediction kais up runs first covers 180 s, not 360.
    let learnedEverywhere = false;
    // on the GPG model without the actor switch (the default before session 44): with the shipped
    // switch the first frame (25 s) is the light actor's, which draws nothing, so learning would start
    // a frame late (the switch's drawing is covered in test/unit/agent/actor-policy.test.ts and above)
    const gate = path.join(__dirname, '..', '..', 'models', 'kais-gpg-gate.json');
    const args = ['--duration', '180', '--speed', '0.5', '--gpg', gate, '--json', '--learn-batch', '256', '--explore', '1', '--verbose'];
    const run = await kaisUp(args, (line, child) => {
      const m = /\| weights v([\d,-]+) \|/.exec(line);
      if (!learnedEverywhere && m && m[1].split(',').every((v) => Number(v) >= 2)) {
        learnedEverywhere = true;
        child.kill('SIGINT');
      }
    });
    // on failure, say how far the learner got
    const learnerLines = run.stderr.split('\n').filter((l) => /learner:/.test(l));
    expect({ learnedEverywhere, learnerLines }).toEqual({ learnedEverywhere: true, learnerLines: expect.anything() });
    expect(run.code).toBe(130);
    const partial = summaryOf(run);
    expect(partial.interrupted).toBe(true);
    expect(partial.unanswered).toBe(0);
    expect(partial.completedInTime as number).toBeGreaterThan(0);
    expect(run.stderr).toMatch(/learner: worker thread/);
    expect(run.stderr).toMatch(/learner: update \d+ -> weights v2 on 256 transitions/);
    expect(partial.evalPolicy).toBe('cmmac/gpg');
  }, 480_000);

  it('keeps every agent dispatching, with no request unanswered, when the orchestrator is SIGKILLed mid-run', async () => {
    let killed = -1;
    let orchestratorPid = -1;
    // the orchestrator (and the restarted one) runs at a lower CPU priority than the request path
    const nice = { first: NaN, restarted: NaN, agent: NaN };
    const priority = (pid: number) => {
      try {
        return os.getPriority(pid);
      } catch {
        return NaN;
      }
    };
    const run = await kaisUp(['--duration', '10', '--json'], (line) => {
      const m = /orchestrator pid=(\d+)/.exec(line);
      if (m && orchestratorPid < 0) {
        orchestratorPid = Number(m[1]);
        nice.first = priority(orchestratorPid);
      }
      const back = /orchestrator pid=(\d+) back on/.exec(line);
      if (back) nice.restarted = priority(Number(back[1]));
      const agents = /agents up \(pids (\d+)/.exec(line);
      if (agents) nice.agent = priority(Number(agents[1]));
      if (/agents up/.test(line) && orchestratorPid > 0) {
        setTimeout(() => {
          killed = orchestratorPid;
          process.kill(orchestratorPid, 'SIGKILL');
        }, 3000);
      }
    });
    expect(run.code).toBe(0);
    expect(killed).toBeGreaterThan(0);
    const s = summaryOf(run);
    expectAccounted(s);
    expect(s.orchestratorRestarts).toBe(1);
    expect(s.childExits).toEqual([expect.objectContaining({ name: 'orchestrator', pid: killed, signal: 'SIGKILL' })]);
    expect(nice).toEqual({ first: ORCHESTRATOR_NICE, restarted: ORCHESTRATOR_NICE, agent: os.getPriority() });
    // the restarted orchestrator resumed the stored model version (the shipped model is v1, the
    // learner may have added some) and the stored placement instead of starting over
    const back = /back on ws:\/\/\S+ \(weights v(\d+), placement v\d+, resumed true\)/.exec(run.stderr);
    expect(back).not.toBeNull();
    const resumedVersion = Number(back![1]);
    expect(resumedVersion).toBeGreaterThanOrEqual(1);
    // every agent ends on the resumed version or a later one: nothing went back to v1
    for (const e of s.perEap as Record<string, number>[]) expect(e.weightVersion).toBeGreaterThanOrEqual(resumedVersion);
    for (const e of s.perEap as Record<string, number>[]) expect(e.completedInTime).toBeGreaterThan(0);
    expect(pidsIn(run.stderr).filter(alive)).toEqual([]);
  }, 60_000);
});
