/** One valid frame of every message type, shared by the protocol tests. */
import { makeFrame, placementBody, type Frame } from '../../../../shared/protocol/envelope';
import { packLightActor, packWeights } from '../../../../shared/protocol/weights';

const TS = 1_700_000_000_000;

export function sampleWeights(version = 3) {
  return packWeights(
    [
      { shape: [3, 2], data: new Float32Array([0.1, -0.2, 0.3, 1e-3, 5, -7.25]) },
      { shape: [2], data: new Float32Array([0.5, -0.5]) },
      { shape: [], data: new Float32Array([42]) },
    ],
    version,
  );
}

export function sampleFrames(): Frame[] {
  return [
    makeFrame(
      'hello',
      0,
      { eapId: 2, token: 's3cret', agentVersion: '0.1.0', weightVersion: null, placementVersion: 4, features: ['actor-switch'] },
      TS,
    ),
    makeFrame('welcome', 1, { sessionId: 'sess-1', heartbeatMs: 5000, weightVersion: 3, placementVersion: null, act: 'sample' }, TS),
    makeFrame('weights', 2, sampleWeights(), TS),
    makeFrame(
      'placement',
      3,
      placementBody(7, 120, [
        [1, 0, 2],
        [0, 3, 0],
      ]),
      TS,
    ),
    makeFrame(
      'experience',
      4,
      {
        eap: 1,
        transitions: [
          {
            eap: 1,
            slot: 10,
            service: 2,
            obs: new Float32Array([0.25, 1, -3]),
            mask: new Uint8Array([1, 0, 1, 1]),
            action: 3,
            logProb: -0.7,
            reward: 1,
            latencyMs: 120.5,
            metDeadline: true,
            done: false,
            weightVersion: 3,
          },
          {
            eap: 1,
            slot: 11,
            service: 0,
            obs: new Float32Array([0, 0, 0]),
            mask: new Uint8Array([0, 0, 0, 1]),
            action: 3,
            logProb: 0,
            reward: -1,
            latencyMs: null,
            metDeadline: false,
            done: true,
            weightVersion: null,
          },
        ],
      },
      TS,
    ),
    makeFrame(
      'telemetry',
      5,
      {
        eap: 0,
        samples: [
          {
            node: 4,
            ts: TS - 250,
            cpu: 0.5,
            mem: 0.25,
            disk: 0.1,
            upBwMbps: 12.5,
            requests: 10,
            succeeded: 9,
            inDeadline: 8,
            latencyMsSum: 900,
          },
        ],
        windows: [
          {
            node: 4,
            id: 17,
            kind: 'ambiguous',
            shape: '8/16',
            steps: 2,
            dims: 3,
            values: new Float32Array([0.5, 0.25, 0.1, 0.75, 0.25, 0.1]),
          },
        ],
      },
      TS,
    ),
    makeFrame('scale', 6, { service: 3, node: 5, replicas: 2 }, TS),
    makeFrame('ack', 7, { of: 2 }, TS),
    makeFrame('error', 8, { code: 'KAIS_ERR_CHECKSUM', message: 'weights checksum mismatch', of: 2 }, TS),
    makeFrame('verdicts', 9, { verdicts: [{ node: 4, id: 17, anomalous: true, score: 1.25 }] }, TS),
  ];
}

/** The optional fields of the light actor switch: weights with a light actor, a placement naming it, a transition it decided. */
export function lightSwitchFrames(): Frame[] {
  const all = sampleFrames();
  const experience = all.find((f) => f.type === 'experience') as Frame & { type: 'experience' };
  return [
    makeFrame(
      'weights',
      20,
      {
        ...sampleWeights(4),
        light: packLightActor(
          [
            { shape: [3, 2], data: new Float32Array([1, 2, 3, 4, 5, 6]) },
            { shape: [2], data: new Float32Array([-1, 1]) },
          ],
          'softplus1',
        ),
      },
      TS,
    ),
    makeFrame('placement', 21, { ...placementBody(8, 121, [[1, 0, 2]]), actor: 'light' }, TS),
    makeFrame('placement', 22, { ...placementBody(9, 122, [[1, 0, 2]]), actor: 'main' }, TS),
    makeFrame('experience', 23, { eap: 1, transitions: [{ ...experience.body.transitions[0], actor: 'light' }] }, TS),
  ];
}
