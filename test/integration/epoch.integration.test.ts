/**
 * Issue 14, versions with epochs, through the real CLI (dist/kais.js, built by `npm test`): a
 * `kais orchestrator` process serves the shipped kais model and a fast placement loop to two agent
 * links (AgentLink + AgentRuntime, the agent's own backoff); its database is deleted mid-run (the
 * running process notices and says so), the process is killed and restarted on the same port with
 * the same --db path. The new store is a new epoch: its weights v1 and placement v1 are below or
 * equal to what the agents hold, and the agents still adopt them within 10 s, with an event on the
 * orchestrator's side ("new store ... epoch") and an `epoch` event on the agents' side saying why.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { AgentLink } from '../../agent/link';
import { AgentRuntime } from '../../agent/runtime';
import { Store } from '../../orchestrator/store';
import { until } from '../support/wait';

const ROOT = path.resolve(__dirname, '..', '..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');
const MODEL = path.join(ROOT, 'models', 'kais-cmmac.bin');

interface Proc {
  child: ChildProcess;
  ready: Promise<Record<string, unknown>>;
  stderr: string[];
  exited: Promise<number | null>;
}

const procs = new Set<ChildProcess>();
afterEach(() => {
  for (const c of procs) c.kill('SIGKILL');
  procs.clear();
});

function orchestrator(args: string[]): Proc {
  const child = spawn(process.execPath, [KAIS, 'orchestrator', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  procs.add(child);
  const stderr: string[] = [];
  readline.createInterface({ input: child.stderr! }).on('line', (l) => stderr.push(l));
  const ready = new Promise<Record<string, unknown>>((resolve, reject) => {
    readline.createInterface({ input: child.stdout! }).on('line', (l) => {
      try {
        const m = JSON.parse(l) as Record<string, unknown>;
        if (m.ready) resolve(m);
      } catch {
        // not the ready line
      }
    });
    child.once('exit', (code) => reject(new Error(`orchestrator exited ${code} before ready: ${stderr.slice(-3).join(' | ')}`)));
  });
  ready.catch(() => undefined);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  exited.then(() => procs.delete(child));
  return { child, ready, stderr, exited };
}

describe('a deleted orchestrator database', () => {
  let dir: string;
  const links: (() => Promise<void>)[] = [];
  beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-epoch-'))));
  afterEach(async () => {
    for (const c of links.splice(0)) await c();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('starts a new epoch after a restart, and the agents adopt its weights and placement within 10 s, saying why', async () => {
    const cfg = path.join(dir, 'c.json');
    const cfg2 = path.join(dir, 'c2.json');
    const config = (speed: number) =>
      JSON.stringify({
        scenario: 'kais',
        checkpoint: MODEL,
        learner: 'none',
        detector: 'none',
        speed,
        heartbeatMs: 500,
        pruneS: 0.2,
        agentTokens: { 0: 't0', 1: 't1' },
      });
    // speed 100: a placement frame every 0.25 s, so the agents hold placement versions of 4 and more
    fs.writeFileSync(cfg, config(100));
    // the restarted one at speed 5: a frame every 5 s, so within the 10 s the agents have to adopt it
    // it has published version 3 at most, below what they hold, however long their reconnect takes
    fs.writeFileSync(cfg2, config(5));
    const db = path.join(dir, 'o.db');
    const first = orchestrator(['--config', cfg, '--db', db, '--port', '0']);
    const r1 = await first.ready;
    const port = r1.port as number;
    const url = `ws://127.0.0.1:${port}`;

    const agents = [0, 1].map((eapId) => {
      let runtime: AgentRuntime | null = null;
      // the agent's own link settings (agent/main.ts)
      const link = new AgentLink({
        url,
        seed: eapId,
        hello: () => runtime!.helloBody(`t${eapId}`, '0.1.0'),
        backoff: { initialMs: 200, maxMs: 5000 },
      });
      runtime = new AgentRuntime(
        (b) => link.send(b),
        (cb) => link.onFrame(cb),
        { eapId, instance: `agent-${eapId}` },
      );
      const rt = runtime;
      const epochEvents: { from: string | null; to: string; reason: string }[] = [];
      rt.on('epoch', (e) => epochEvents.push(e));
      links.push(async () => {
        await link.close();
        rt.dispose();
      });
      link.start();
      return { link, rt, epochEvents };
    });
    await until(
      () => agents.every((a) => a.rt.weightVersion === 1 && (a.rt.placementVersion ?? 0) >= 4),
      'agents on weights v1 and placement v4+',
      15_000,
    );
    const oldEpoch = agents[0].rt.weights!.epoch!;
    expect(oldEpoch).toMatch(/^[0-9a-z]+-[0-9a-f]{12}$/);
    expect(agents[0].rt.placement!.epoch).toBe(oldEpoch);

    // the database goes away under the running orchestrator: it notices and says what that means
    for (const f of [db, `${db}-wal`, `${db}-shm`]) fs.rmSync(f, { force: true });
    await until(
      () => first.stderr.some((l) => /o\.db was deleted while the orchestrator was running/.test(l)),
      'the running orchestrator to notice',
      5000,
    );
    const held = agents.map((a) => a.rt.placementVersion!);

    // killed and restarted on the same port with the same --db path: a new store, a new epoch
    first.child.kill('SIGKILL');
    await first.exited;
    const second = orchestrator(['--config', cfg2, '--db', db, '--port', String(port)]);
    const r2 = await second.ready;
    const t0 = Date.now();
    expect(r2.weightVersion).toBe(1);
    await until(
      () =>
        agents.every(
          (a) => a.rt.weights?.epoch !== undefined && a.rt.weights.epoch !== oldEpoch && a.rt.placement?.epoch === a.rt.weights.epoch,
        ),
      "both agents on the new epoch's weights and placement",
      10_000,
    );
    const tookMs = Date.now() - t0;
    process.stderr.write(
      `epoch: agents held placement v${held.join('/')} of ${oldEpoch}; on the new epoch's weights v1 and placement after ${tookMs} ms\n`,
    );
    const newEpoch = agents[0].rt.weights!.epoch!;
    for (const a of agents) {
      expect(a.rt.weightVersion).toBe(1); // same number, other epoch: adopted, not "stale"
      expect(a.rt.placementVersion!).toBeLessThan(Math.max(...held)); // a lower number: adopted
      expect(a.epochEvents.at(-1)).toMatchObject({ from: oldEpoch, to: newEpoch, reason: expect.stringMatching(/store is a new one/) });
    }
    // the orchestrator's event says why the versions started again
    expect(second.stderr.some((l) => l.includes(`event epoch: new store ${db}: epoch ${newEpoch}`))).toBe(true);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    const s = Store.open(db, { readonly: true });
    expect(s.epoch).toBe(newEpoch);
    expect(s.events({ kind: 'epoch' })).toHaveLength(1);
    s.close();
  });
});
