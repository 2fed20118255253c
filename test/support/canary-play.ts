/**
 * A canary rollout to play against a live orchestrator (test/integration/canary.integration.test.ts,
 * the dashboard's browser test): a store holding a random actor as v1 and a config on the small
 * scenario with the canary on, and two hand-driven agents that ack every weights frame and report
 * what a version does to their devices, so the verdict is known in advance.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { RunningOrchestrator } from '../../orchestrator/main';
import { Store } from '../../orchestrator/store';
import { actorShapes, initActorWeights } from '../../shared/nets/actor';
import { Codec } from '../../shared/protocol/codec';
import type { NodeSample, WeightsBody } from '../../shared/protocol/envelope';
import { packWeights } from '../../shared/protocol/weights';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { observationDim } from '../../shared/spaces';
import { rawAgent, type RawAgent } from './raw-agent';

export const CANARY_ADMIN = 'admin-token-0123456789';

/** One telemetry sample of node 0 now: `requests` sent, `succeeded` answered, `inDeadline` of them in time, 100 ms each. */
export function nodeSample(requests: number, succeeded: number, inDeadline: number): NodeSample {
  return {
    node: 0,
    ts: Date.now(),
    cpu: 0.5,
    mem: 0.5,
    disk: 0,
    upBwMbps: 1,
    requests,
    succeeded,
    inDeadline,
    latencyMsSum: 100 * succeeded,
  };
}

const small = loadScenario('small');
const topo = topologyOf(small);
const A = topo.numNodes + 1;
const D = observationDim({ numServices: topo.numServices, numTargets: A, numEaps: topo.numEaps });

/** A store holding a random actor as v1; the orchestrator's config (canary on, gate and learner off). */
export function canarySetUp(dir: string, extra: Record<string, unknown>): { db: string; cfgFile: string; v1: WeightsBody } {
  const db = path.join(dir, 'o.db');
  const s = Store.open(db);
  const shapes = actorShapes(D, A);
  const v1 = packWeights(
    initActorWeights(D, A, 3).map((data, i) => ({ shape: shapes[i], data })),
    1,
    'relu1',
  );
  s.putModel(v1);
  s.close();
  const cfgFile = path.join(dir, 'c.json');
  fs.writeFileSync(
    cfgFile,
    JSON.stringify({
      scenario: 'small',
      agentTokens: { 0: 'tok-0', 1: 'tok-1' },
      adminToken: CANARY_ADMIN,
      learner: 'none',
      detector: 'none',
      actorHead: 'relu1',
      heartbeatMs: 1000,
      // windows of 1 s (the agents below send 10 telemetry frames a second), 2 s of baseline
      canary: { share: 0.5, windowS: 1, maxWindows: 2, settleS: 0.2, baselineS: 2, minRequests: 200, margin: 0.03, alpha: 0.05 },
      ...extra,
    }),
  );
  return { db, cfgFile, v1 };
}

export interface PlayedAgent {
  raw: RawAgent;
  /** Versions applied, in order. */
  versions: number[];
  checksums: Map<number, number>;
}

/**
 * Two agents that ack every weights frame and send, every 100 ms, one telemetry frame of 60
 * requests: in time 30% under `bad(version)`, else 80%; of the rest half late, half refused.
 */
export async function playAgents(
  o: RunningOrchestrator,
  bad: (checksum: number) => boolean,
  cleanups: (() => unknown)[],
): Promise<PlayedAgent[]> {
  const codec = new Codec();
  const agents: PlayedAgent[] = [];
  for (const eap of [0, 1]) {
    const raw = await rawAgent(
      o.hub.url,
      { eapId: eap, token: `tok-${eap}`, agentVersion: 't', weightVersion: null, placementVersion: null, epoch: null, instance: `c${eap}` },
      codec,
      cleanups,
    );
    agents.push({ raw, versions: [], checksums: new Map() });
  }
  let seen = agents.map(() => 0);
  const timer = setInterval(() => {
    agents.forEach((a, eap) => {
      for (const f of a.raw.frames.slice(seen[eap])) {
        if (f.type !== 'weights') continue;
        a.versions.push(f.body.version);
        a.checksums.set(f.body.version, f.body.checksum);
        a.raw.send('ack', { of: f.seq });
      }
      seen[eap] = a.raw.frames.length;
      const held = a.versions[a.versions.length - 1];
      const rate = held !== undefined && bad(a.checksums.get(held)!) ? 0.3 : 0.8;
      // of the rest, half answered late, half refused
      const inDeadline = Math.round(60 * rate);
      const succeeded = inDeadline + (60 - inDeadline) / 2;
      a.raw.send('telemetry', { eap, samples: [nodeSample(60, succeeded, inDeadline)] });
    });
  }, 100);
  cleanups.push(() => clearInterval(timer));
  seen = seen.map(() => 0);
  return agents;
}
