/**
 * Small scenarios with known answers for simulator tests.
 */
import { validateScenario, type Scenario } from '../../shared/scenario';

/**
 * 1 eAP, 1 edge node with c cores and c replicas of one 1-core service (a c-server queue), no
 * network delays and no scaling; the cloud exists (1 vCPU) for policies that use it.
 */
export function oneNodeQueue(c: number, slotS = 0.25, slotsPerFrame = 40): Scenario {
  const zero = { latencyMs: 0, mbps: 1e12 };
  const raw: Record<string, unknown> = {
    name: `queue-c${c}`,
    slotS,
    slotsPerFrame,
    scaleNodesPerFrame: 0,
    eaps: [{ nodes: [{ cpuCores: c, memGB: c }] }],
    cloud: { vms: 1, vcpuPerVm: 1, memGBPerVm: 1 },
    network: { deviceToEap: zero, eapToOwnNode: zero, eapToOtherNode: zero, edgeToCloud: zero },
    services: [{ cpuCores: 1, memGB: 1 }],
    replicaStartupS: 0,
    initialReplicasPerEap: c,
    maxReplicasPerService: c,
    queueCapPerReplica: 1e6,
    workload: { ratePerS: 1, inputMB: 0, deadlineBaseS: 1e9, deadlineSlack: 0 },
  };
  return validateScenario(raw, raw.name as string);
}
