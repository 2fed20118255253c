/**
 * Network model: transfer time = latency + size / bandwidth, per link class (DESIGN.md defaults:
 * device-eAP 20 ms / 50 Mbps, inside the edge cluster < 10 ms / 1 Gbps, edge-cloud 100 ms / 100 Mbps).
 */
import type { LinkSpec, Scenario } from './scenario';

/** Device -> eAP upload of a request payload (s): what `kais up`'s load generator waits before it sends, as the simulator does. */
export function uploadS(scenario: Scenario, inputMB: number): number {
  const l = scenario.network.deviceToEap;
  return l.latencyMs / 1000 + (inputMB * 8) / l.mbps;
}

export class Network {
  /** [eap * numTargets + target] one-way latency (s) eAP -> target. */
  readonly latencyS: Float64Array;
  /** [eap * numTargets + target] seconds per MB on the eAP -> target link. */
  readonly sPerMB: Float64Array;
  readonly deviceLatencyS: number;
  readonly deviceSPerMB: number;

  constructor(
    scenario: Scenario,
    nodeEap: ArrayLike<number>,
    private readonly numTargets: number,
  ) {
    const numEaps = scenario.eaps.length;
    this.latencyS = new Float64Array(numEaps * numTargets);
    this.sPerMB = new Float64Array(numEaps * numTargets);
    const perMB = (l: LinkSpec): number => 8 / l.mbps;
    const net = scenario.network;
    for (let b = 0; b < numEaps; b++) {
      for (let t = 0; t < numTargets; t++) {
        const link = t === numTargets - 1 ? net.edgeToCloud : nodeEap[t] === b ? net.eapToOwnNode : net.eapToOtherNode;
        this.latencyS[b * numTargets + t] = link.latencyMs / 1000;
        this.sPerMB[b * numTargets + t] = perMB(link);
      }
    }
    this.deviceLatencyS = net.deviceToEap.latencyMs / 1000;
    this.deviceSPerMB = perMB(net.deviceToEap);
  }

  /** Device -> eAP upload of the request payload (s). */
  uploadS(inputMB: number): number {
    return this.deviceLatencyS + inputMB * this.deviceSPerMB;
  }

  /** eAP -> target transfer of the payload (s). */
  transferS(eap: number, target: number, inputMB: number): number {
    const k = eap * this.numTargets + target;
    return this.latencyS[k] + inputMB * this.sPerMB[k];
  }

  /** Target -> eAP -> device return of the (small) result: latencies only (s). */
  returnS(eap: number, target: number): number {
    return this.latencyS[eap * this.numTargets + target] + this.deviceLatencyS;
  }
}
