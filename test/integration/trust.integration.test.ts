/**
 * Issue 14, trust between authenticated parties: the poisoning attack of the adversarial pass
 * replayed against a live orchestrator (startOrchestrator: real hub on loopback, real SQLite file,
 * the online learner in-process) with a real agent link on eAP 0 that keeps sending honest
 * experience. The attacker holds eAP 1's token (a compromised agent) and a stolen copy of eAP 0's:
 *
 * - a hello loop as eAP 0 with eAP 1's token: refused (KAIS_ERR_AUTH), counted;
 * - a hello loop as eAP 0 with eAP 0's own token from another process: refused (KAIS_ERR_DUPLICATE);
 *   the real agent is never evicted;
 * - experience labelled "cloud = 1, everything else = 0" claiming eAP 0 from its eAP 1 session:
 *   refused; a batch with reward 1e300: refused; after `quarantineAfter` invalid frames the session
 *   is closed (4003) and eAP 1's hellos are refused for the quarantine;
 * - every refusal is an event naming the eAP (and the session);
 * - nothing of the attacker's is stored, the published weights are learned from the real agent's
 *   experience only, learning goes on, and the real agent stays connected (one session throughout).
 *
 * No sleeps: every wait is on an event or a condition polled against a deadline.
 */
import WebSocket from 'ws';
import { AgentLink } from '../../agent/link';
import { AgentRuntime } from '../../agent/runtime';
import { learningOrchestrator } from '../support/store-seed';
import { Codec } from '../../shared/protocol/codec';
import { makeFrame, type Frame, type HelloBody, type Transition } from '../../shared/protocol/envelope';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';
import { until as waitUntil } from '../support/wait';
import { perTestDir } from '../support/tmp';

const scenario = loadScenario('small');
const topo = topologyOf(scenario);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });
const codec = new Codec();

const tmp = perTestDir('kais-trust-');
const { cleanups } = tmp;

/** Polls `cond` every 20 ms until it holds; rejects after `ms`. */
const until = (cond: () => boolean, what: string, ms = 20_000): Promise<void> => waitUntil(cond, what, ms);

/** Honest experience of eAP `eap`: explored decisions of weights `version`, rewards 0 or 1. */
function honest(eap: number, version: number, n: number, rng: Rng): Transition[] {
  return Array.from({ length: n }, (_, k) => {
    const obs = Float32Array.from({ length: D }, () => rng.next());
    const action = Math.floor(rng.next() * A);
    const met = rng.next() < 0.7;
    return {
      eap,
      slot: k,
      service: k % topo.numServices,
      obs,
      mask: new Uint8Array(A).fill(1),
      action,
      logProb: Math.log(1 / A),
      reward: met ? 1 : 0,
      latencyMs: 50,
      metDeadline: met,
      done: false,
      weightVersion: version,
    };
  });
}

/** A raw ws client: sends frames, collects what comes back, resolves `closed` with the close code. */
function raw(url: string) {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  ws.on('error', () => undefined);
  const frames: Frame[] = [];
  const opened = new Promise<void>((resolve) => ws.once('open', () => resolve()));
  const closed = new Promise<number>((resolve) => ws.once('close', (code) => resolve(code)));
  ws.on('message', (data: Buffer) => {
    const r = codec.decode(data);
    if (r.ok) frames.push(r.frame);
  });
  let seq = 0;
  const send = (type: 'hello' | 'experience' | 'telemetry', body: unknown) =>
    ws.send(codec.encode(makeFrame(type, seq++, body as never) as Frame));
  cleanups.push(() => ws.terminate());
  return { ws, frames, opened, closed, send };
}

const hello = (eapId: number, token: string, instance: string): HelloBody => ({
  eapId,
  token,
  agentVersion: 'attacker',
  weightVersion: null,
  placementVersion: null,
  epoch: null,
  instance,
});

describe('poisoning replay against a live orchestrator', () => {
  it('refuses and quarantines the attacker; learning goes on from the real agent only, which stays connected', async () => {
    // a stored model v1 to learn from, as a restarted orchestrator would have
    const logs: string[] = [];
    const o = await learningOrchestrator(
      tmp.dir,
      D,
      A,
      { agentTokens: { 0: 'tok-0', 1: 'tok-1' }, intake: { quarantineAfter: 5, quarantineS: 30 } },
      { log: (l) => logs.push(l) },
    );
    cleanups.push(() => o.close());

    // ---- the real agent of eAP 0 ----
    let runtime: AgentRuntime | null = null;
    const link = new AgentLink({
      url: o.hub.url,
      seed: 1,
      hello: () => runtime!.helloBody('tok-0', '0.1.0'),
      backoff: { initialMs: 50, maxMs: 500 },
      heartbeatMs: 1000,
    });
    runtime = new AgentRuntime(
      (b) => link.send(b),
      (cb) => link.onFrame(cb),
      { eapId: 0, instance: 'real-agent-0' },
    );
    const rt = runtime;
    /** Every loss of the real agent's connection, with its close code and reason (a failure names the cause). */
    const downs: string[] = [];
    link.on('down', (code: number, reason: string) => downs.push(`${code} ${reason}`));
    cleanups.push(async () => {
      await link.close();
      rt.dispose();
    });
    link.start();
    await until(() => rt.weightVersion === 1 && rt.placementVersion !== null, 'the real agent to hold weights v1 and a placement');
    const realSession = o.hub.sessions()[0].sessionId;
    const rng = new Rng(7);
    let sentBatches = 0;
    let lastSent = 0;
    /** One honest batch every 200 ms at most (320 transitions/s, well inside the rate limit). */
    const sendHonest = () => {
      if (Date.now() - lastSent < 200) return;
      lastSent = Date.now();
      rt.sendFrame('experience', { eap: 0, transitions: honest(0, o.registry.weightVersion!, 64, rng) });
      sentBatches++;
    };

    // ---- 1. hello loop as eAP 0 with eAP 1's token, then with eAP 0's stolen token ----
    for (const [token, code] of [
      ['tok-1', 'KAIS_ERR_AUTH'],
      ['tok-0', 'KAIS_ERR_DUPLICATE'],
    ] as const) {
      for (let i = 0; i < 10; i++) {
        const c = raw(o.hub.url);
        await c.opened;
        c.send('hello', hello(0, token, `attacker-${i}`));
        const closeCode = await c.closed;
        expect(c.frames.map((f) => f.type === 'error' && f.body.code)).toEqual([code]);
        expect(closeCode).toBe(code === 'KAIS_ERR_AUTH' ? 4001 : 4009);
      }
    }
    expect(o.hub.stats.authFailures).toBe(10);
    expect(o.hub.stats.duplicateHellos).toBe(10);

    // ---- 2. as eAP 1 (its own token): mislabelled experience claiming eAP 0, then reward 1e300 ----
    const attacker = raw(o.hub.url);
    await attacker.opened;
    attacker.send('hello', hello(1, 'tok-1', 'attacker-session'));
    await until(() => attacker.frames.some((f) => f.type === 'welcome'), 'the attacker welcomed as eAP 1');
    const published = o.registry.weightVersion!;
    const mislabelled = honest(0, published, 64, rng).map((t) => ({
      ...t,
      reward: t.action === A - 1 ? 1 : 0,
      metDeadline: t.action === A - 1,
    }));
    attacker.send('experience', { eap: 0, transitions: mislabelled });
    const huge = honest(1, published, 64, rng).map((t, k) => (k === 0 ? { ...t, reward: 1e300 } : t));
    for (let i = 0; i < 6 && attacker.ws.readyState === WebSocket.OPEN; i++) attacker.send('experience', { eap: 1, transitions: huge });
    expect(await attacker.closed).toBe(4003);
    const errors = attacker.frames.filter((f) => f.type === 'error').map((f) => (f.type === 'error' ? f.body.code : ''));
    expect(errors[0]).toBe('KAIS_ERR_STATE'); // another eAP's experience
    expect(errors.slice(1)).toEqual(Array(5).fill('KAIS_ERR_INVALID')); // reward out of bounds, 5th quarantines
    // quarantined: eAP 1 cannot come back for now
    const again = raw(o.hub.url);
    await again.opened;
    again.send('hello', hello(1, 'tok-1', 'attacker-again'));
    expect(await again.closed).toBe(4003);
    expect(again.frames.map((f) => f.type === 'error' && f.body.code)).toEqual(['KAIS_ERR_QUARANTINED']);

    // ---- 3. learning goes on from the real agent's experience ----
    await until(
      () => {
        if (o.learner!.stats.updates < 1 || o.registry.weightVersion === published) sendHonest();
        return o.registry.weightVersion! > published && rt.weightVersion === o.registry.weightVersion;
      },
      'a new weight version learned from the real agent and applied by it',
      40_000,
    );
    expect(o.learner!.stats.failedUpdates).toBe(0);

    // nothing of the attacker's was stored: every stored batch is eAP 0's, every reward in [0, 1]
    const stored = o.store.readExperience(0);
    expect(stored.length).toBe(sentBatches);
    for (const r of stored) {
      expect(r.body.eap).toBe(0);
      for (const t of r.body.transitions) expect(t.reward === 0 || t.reward === 1).toBe(true);
    }
    // the real agent was never evicted
    expect(downs).toEqual([]);
    expect(o.hub.sessions().map((s) => s.sessionId)).toEqual([realSession]);
    // events name the eAP and the session
    const events = o.store.events();
    const kinds = (k: string) => events.filter((e) => e.kind === k);
    // ten of each from one address: one stored event a minute per address and kind (all ten were refused: the metric counts them)
    expect(kinds('auth')).toHaveLength(1);
    expect(kinds('auth').every((e) => e.eap === 0)).toBe(true);
    expect(kinds('duplicate-hello')).toHaveLength(1);
    expect(kinds('duplicate-hello').every((e) => e.eap === 0 && e.session === realSession)).toBe(true);
    const invalid = kinds('invalid-experience');
    expect(invalid.length).toBeGreaterThanOrEqual(1);
    expect(invalid[0]).toMatchObject({ eap: 1, session: expect.stringMatching(/^e1-/) });
    expect(invalid[0].message).toMatch(/reward 1e\+300 is outside \[0, 1\]/);
    expect(kinds('quarantine').length).toBeGreaterThanOrEqual(1);
    expect(kinds('quarantined-hello')).toHaveLength(1);
  });
});
