/**
 * Issue 17 item 5, the poisoned-experience drill against a live orchestrator (startOrchestrator:
 * real hub on loopback, real SQLite file, the online learner in-process, /metrics over HTTP): one
 * agent (eAP 1, its own token) sends experience with NaN and infinite rewards and features, and
 * absurd finite ones. Every frame is refused (by the codec for the non-finite values, by the
 * intake for the out-of-range ones), nothing of it is stored or learned from, the published
 * weight version does not move, every refusal is counted, and the events name eAP 1.
 *
 * No sleeps: every wait is on a reply or a condition polled against a deadline.
 */
import * as http from 'node:http';
import { parseMetrics, sample } from '../support/prometheus';
import { learningOrchestrator } from '../support/store-seed';
import { Codec } from '../../shared/protocol/codec';
import type { Transition } from '../../shared/protocol/envelope';
import { rawAgent } from '../support/raw-agent';
import { Rng } from '../../shared/rng';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';
import { until as waitUntil } from '../support/wait';
import { perTestDir } from '../support/tmp';

const scenario = loadScenario('small');
const topo = topologyOf(scenario);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });
/** Sends what a broken agent would: no outgoing validation. */
const codec = new Codec({ validateOutgoing: false });

const tmp = perTestDir('kais-poison-');
const { cleanups } = tmp;

const until = (cond: () => boolean, what: string, ms = 20_000): Promise<void> => waitUntil(cond, what, ms);

function batch(eap: number, version: number, n: number, rng: Rng): Transition[] {
  return Array.from({ length: n }, (_, k) => {
    const action = Math.floor(rng.next() * A);
    return {
      eap,
      slot: k,
      service: k % topo.numServices,
      obs: Float32Array.from({ length: D }, () => rng.next()),
      mask: new Uint8Array(A).fill(1),
      action,
      logProb: Math.log(1 / A),
      reward: 1,
      latencyMs: 50,
      metDeadline: true,
      done: false,
      weightVersion: version,
    };
  });
}

function getText(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    http
      .get(url, (res) => {
        let s = '';
        res.on('data', (c: Buffer) => (s += c.toString()));
        res.on('end', () => resolve(s));
      })
      .on('error', reject);
  });
}

describe('poisoned experience from one agent', () => {
  it('is refused frame by frame, changes no published weight, is counted on /metrics and named in events', async () => {
    const o = await learningOrchestrator(
      tmp.dir,
      D,
      A,
      { agentTokens: { 0: 'tok-0', 1: 'tok-1' }, intake: { quarantineAfter: 100, quarantineS: 30 } },
      { httpPort: 0, log: () => undefined },
    );
    cleanups.push(() => o.close());
    const before = o.registry.weightVersion;
    expect(before).toBe(1);

    const { frames, send } = await rawAgent(
      o.hub.url,
      {
        eapId: 1,
        token: 'tok-1',
        agentVersion: 'poisoned',
        weightVersion: null,
        placementVersion: null,
        epoch: null,
        instance: 'poisoned-1',
      },
      codec,
      cleanups,
    );

    const rng = new Rng(5);
    const poison: [string, (t: Transition, k: number) => Transition][] = [
      ['NaN reward', (t, k) => (k === 3 ? { ...t, reward: NaN } : t)],
      ['infinite reward', (t, k) => (k === 0 ? { ...t, reward: Infinity } : t)],
      ['NaN feature', (t, k) => (k === 7 ? { ...t, obs: Float32Array.from(t.obs, (x, i) => (i === 2 ? NaN : x)) } : t)],
      ['absurd reward', (t, k) => (k === 10 ? { ...t, reward: 1e6 } : t)],
      ['negative reward', (t, k) => (k === 1 ? { ...t, reward: -50 } : t)],
      ['absurd feature', (t, k) => (k === 0 ? { ...t, obs: Float32Array.from(t.obs, (x, i) => (i === 0 ? 1e30 : x)) } : t)],
    ];
    for (const [, f] of poison) send('experience', { eap: 1, transitions: batch(1, before!, 64, rng).map(f) });
    await until(() => frames.filter((f) => f.type === 'error').length === poison.length, 'an error reply per poisoned frame');
    const codes = frames.flatMap((f) => (f.type === 'error' ? [f.body.code] : []));
    // the codec catches the non-finite values, the intake the finite ones out of range
    expect(codes).toEqual([
      'KAIS_ERR_BAD_FIELD',
      'KAIS_ERR_BAD_FIELD',
      'KAIS_ERR_BAD_FIELD',
      'KAIS_ERR_INVALID',
      'KAIS_ERR_INVALID',
      'KAIS_ERR_INVALID',
    ]);

    // nothing stored, nothing learned, the published version unchanged
    expect(o.store.readExperience(0).filter((r) => r.body.eap === 1)).toHaveLength(0);
    expect(o.learner!.stats.updates).toBe(0);
    expect(o.registry.weightVersion).toBe(before);
    expect(o.intake.stats.invalid).toBe(poison.length);

    // events name eAP 1 (one per kind within eventIntervalMs; the rest folded into the next)
    const events = o.store.events();
    const frameEvents = events.filter((e) => e.kind === 'invalid-frame');
    const expEvents = events.filter((e) => e.kind === 'invalid-experience');
    expect(frameEvents.length).toBeGreaterThanOrEqual(1);
    expect(expEvents.length).toBeGreaterThanOrEqual(1);
    for (const e of [...frameEvents, ...expEvents]) expect(e.eap).toBe(1);
    expect(frameEvents[0].message).toMatch(/reward/);
    expect(expEvents[0].message).toMatch(/reward 1000000 is outside \[0, 1\]/);

    // /metrics: the refusals by verdict, the events by kind
    const families = parseMetrics(await getText(`http://127.0.0.1:${o.httpPort}/metrics`));
    expect(sample(families, 'kais_orchestrator_intake_total', { verdict: 'invalid' })).toBe(poison.length);
    expect(sample(families, 'kais_orchestrator_events_total', { kind: 'invalid-frame' })).toBe(frameEvents.length);
    expect(sample(families, 'kais_orchestrator_events_total', { kind: 'invalid-experience' })).toBe(expEvents.length);
  });
});
