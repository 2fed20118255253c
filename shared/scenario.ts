/**
 * Scenario = topology + services + network + simulator settings. Built-ins live as data files in
 * shared/scenarios/*.json; `--scenario <file>` reads the same schema, validated field by field.
 */
import * as path from 'path';
import { UsageError } from './errors';
import { readInputFile } from './config';

import tiny from './scenarios/tiny.json';
import small from './scenarios/small.json';
import kais from './scenarios/kais.json';
import large from './scenarios/large.json';

export interface NodeSpec {
  cpuCores: number;
  memGB: number;
}
export interface LinkSpec {
  latencyMs: number;
  mbps: number;
}
export interface ServiceSpec {
  /** CPU share of one replica (cores): processing time = work / cpuCores. */
  cpuCores: number;
  /** Memory reserved by one replica while it exists (GB). */
  memGB: number;
  /** Relative popularity (arrival weight) for synthetic workloads. */
  weight: number;
  /** Relative work multiplier for synthetic workloads (1 = calibrated median). */
  workScale: number;
}

export interface Scenario {
  name: string;
  /** Slot length (s): the learning time scale (rewards, the critic's states); requests are dispatched on arrival. */
  slotS: number;
  /** Slots per frame: orchestration time scale. */
  slotsPerFrame: number;
  /** H: edge nodes an orchestration step may rescale per frame. */
  scaleNodesPerFrame: number;
  eaps: { nodes: NodeSpec[] }[];
  cloud: { vms: number; vcpuPerVm: number; memGBPerVm: number };
  network: {
    deviceToEap: LinkSpec;
    eapToOwnNode: LinkSpec;
    eapToOtherNode: LinkSpec;
    edgeToCloud: LinkSpec;
  };
  services: ServiceSpec[];
  /** Seconds before a new replica serves. */
  replicaStartupS: number;
  /** Replicas of every service placed on each eAP's nodes at t = 0. */
  initialReplicasPerEap: number;
  /** Upper bound on replicas of one service in the edge cluster (orchestration). */
  maxReplicasPerService: number;
  /** A node is a valid target for w while its queue for w is below this x its ready replicas of w. */
  queueCapPerReplica: number;
  workload: {
    /** Mean arrival rate (requests/s) of the whole cluster at load 1. */
    ratePerS: number;
    /** Mean input size (MB). */
    inputMB: number;
    /** Relative deadline = deadlineBaseS + deadlineSlack x nominal processing time, see to-requests.ts. */
    deadlineBaseS: number;
    deadlineSlack: number;
  };
}

const BUILT_INS: Record<string, unknown> = { tiny, small, kais, large };
export const BUILT_IN_SCENARIOS = Object.keys(BUILT_INS);

/** Resolve `--scenario <name|file>`: a built-in name, or a JSON file validated field by field. */
export function loadScenario(nameOrFile: string): Scenario {
  if (Object.prototype.hasOwnProperty.call(BUILT_INS, nameOrFile)) {
    return validateScenario(BUILT_INS[nameOrFile], `built-in scenario ${nameOrFile}`);
  }
  const looksLikeFile = nameOrFile.includes('/') || nameOrFile.includes('\\') || nameOrFile.endsWith('.json');
  if (!looksLikeFile) {
    throw new UsageError(`--scenario: unknown scenario "${nameOrFile}" (built-ins: ${BUILT_IN_SCENARIOS.join(', ')}, or a .json file)`);
  }
  const text = readInputFile(nameOrFile, '--scenario');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`${nameOrFile}: not valid JSON (${(e as Error).message})`);
  }
  const s = validateScenario(raw, nameOrFile);
  if (!s.name) s.name = path.basename(nameOrFile, '.json');
  return s;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Validates every field; throws a UsageError naming the source and the field path. */
export function validateScenario(raw: unknown, source: string): Scenario {
  const fail = (field: string, problem: string): never => {
    throw new UsageError(`${source}: field "${field}" ${problem}`, 'KAIS_ERR_SCENARIO');
  };
  const obj = (v: unknown, field: string): Obj => (isObj(v) ? v : fail(field, 'must be an object'));
  const num = (o: Obj, key: string, field: string, min: number, max = Infinity, integer = false): number => {
    const v = o[key];
    if (typeof v !== 'number' || !Number.isFinite(v)) return fail(field, `must be a number, got ${JSON.stringify(v)}`);
    if (integer && !Number.isInteger(v)) return fail(field, `must be an integer, got ${v}`);
    if (v < min || v > max) return fail(field, `must be in [${min}, ${max}], got ${v}`);
    return v;
  };
  const link = (o: Obj, key: string, field: string): LinkSpec => {
    const l = obj(o[key], field);
    return { latencyMs: num(l, 'latencyMs', `${field}.latencyMs`, 0, 60000), mbps: num(l, 'mbps', `${field}.mbps`, 1e-6) };
  };

  const r = obj(raw, '(root)');
  // dispatchBudgetPerSlot: a per-eAP dispatch budget per slot until edge-cloud-v1; accepted and
  // ignored since the simulator dispatches on arrival (edge-cloud-v2), so older files still load
  if (r.dispatchBudgetPerSlot !== undefined) num(r, 'dispatchBudgetPerSlot', 'dispatchBudgetPerSlot', 1, 1e6, true);
  const known = new Set([
    'name',
    'slotS',
    'slotsPerFrame',
    'scaleNodesPerFrame',
    'eaps',
    'cloud',
    'network',
    'services',
    'replicaStartupS',
    'initialReplicasPerEap',
    'maxReplicasPerService',
    'queueCapPerReplica',
    'dispatchBudgetPerSlot',
    'workload',
    'description',
  ]);
  for (const k of Object.keys(r)) if (!known.has(k)) fail(k, 'is not a known scenario field');
  if (r.name !== undefined && typeof r.name !== 'string') fail('name', 'must be a string');

  if (!Array.isArray(r.eaps) || r.eaps.length === 0) fail('eaps', 'must be a non-empty array');
  const eaps = (r.eaps as unknown[]).map((e, b) => {
    const eo = obj(e, `eaps[${b}]`);
    if (!Array.isArray(eo.nodes) || eo.nodes.length === 0) fail(`eaps[${b}].nodes`, 'must be a non-empty array');
    return {
      nodes: (eo.nodes as unknown[]).map((n, i) => {
        const no = obj(n, `eaps[${b}].nodes[${i}]`);
        return {
          cpuCores: num(no, 'cpuCores', `eaps[${b}].nodes[${i}].cpuCores`, 0.01, 1024),
          memGB: num(no, 'memGB', `eaps[${b}].nodes[${i}].memGB`, 0.01, 65536),
        };
      }),
    };
  });
  const cloudO = obj(r.cloud, 'cloud');
  const netO = obj(r.network, 'network');
  if (!Array.isArray(r.services) || r.services.length === 0) fail('services', 'must be a non-empty array');
  const services = (r.services as unknown[]).map((s, w) => {
    const so = obj(s, `services[${w}]`);
    return {
      cpuCores: num(so, 'cpuCores', `services[${w}].cpuCores`, 0.01, 1024),
      memGB: num(so, 'memGB', `services[${w}].memGB`, 0.001, 65536),
      weight: so.weight === undefined ? 1 : num(so, 'weight', `services[${w}].weight`, 0),
      workScale: so.workScale === undefined ? 1 : num(so, 'workScale', `services[${w}].workScale`, 1e-6),
    };
  });
  const wl = obj(r.workload, 'workload');
  const s: Scenario = {
    name: typeof r.name === 'string' ? r.name : '',
    slotS: num(r, 'slotS', 'slotS', 0.001, 3600),
    slotsPerFrame: num(r, 'slotsPerFrame', 'slotsPerFrame', 1, 1e6, true),
    scaleNodesPerFrame: num(r, 'scaleNodesPerFrame', 'scaleNodesPerFrame', 0, 1e6, true),
    eaps,
    cloud: {
      vms: num(cloudO, 'vms', 'cloud.vms', 1, 1e6, true),
      vcpuPerVm: num(cloudO, 'vcpuPerVm', 'cloud.vcpuPerVm', 0.01),
      memGBPerVm: num(cloudO, 'memGBPerVm', 'cloud.memGBPerVm', 0.01),
    },
    network: {
      deviceToEap: link(netO, 'deviceToEap', 'network.deviceToEap'),
      eapToOwnNode: link(netO, 'eapToOwnNode', 'network.eapToOwnNode'),
      eapToOtherNode: link(netO, 'eapToOtherNode', 'network.eapToOtherNode'),
      edgeToCloud: link(netO, 'edgeToCloud', 'network.edgeToCloud'),
    },
    services,
    replicaStartupS: num(r, 'replicaStartupS', 'replicaStartupS', 0, 3600),
    initialReplicasPerEap: num(r, 'initialReplicasPerEap', 'initialReplicasPerEap', 0, 1000, true),
    maxReplicasPerService: num(r, 'maxReplicasPerService', 'maxReplicasPerService', 1, 1e6, true),
    queueCapPerReplica: num(r, 'queueCapPerReplica', 'queueCapPerReplica', 1, 1e6),
    workload: {
      // bounded: an absurd rate is a typo, not a cluster (it would draw requests until memory runs
      // out); deadlines are not (a test's "never binds" is 1e9 s)
      ratePerS: num(wl, 'ratePerS', 'workload.ratePerS', 0, 100_000),
      inputMB: num(wl, 'inputMB', 'workload.inputMB', 0),
      deadlineBaseS: num(wl, 'deadlineBaseS', 'workload.deadlineBaseS', 0),
      deadlineSlack: num(wl, 'deadlineSlack', 'workload.deadlineSlack', 0),
    },
  };
  // every service must be servable somewhere: on an edge node with both its CPU and its memory, or
  // in the cloud (one pool); placement goes by the same rule (a replica never lands where a request
  // of it could not start)
  const nodes = eaps.flatMap((e) => e.nodes);
  const cloudCpu = s.cloud.vcpuPerVm * s.cloud.vms;
  services.forEach((svc, w) => {
    const onEdge = nodes.some((n) => n.cpuCores >= svc.cpuCores - 1e-9 && n.memGB >= svc.memGB - 1e-9);
    if (!onEdge && svc.cpuCores > cloudCpu + 1e-9) {
      fail(`services[${w}]`, `needs ${svc.cpuCores} cores and ${svc.memGB} GB: no edge node has both, and the cloud has ${cloudCpu} cores`);
    }
  });
  return s;
}

/** Derived sizes used everywhere. */
/**
 * The same scenario with learning slots of `slotS` seconds and the same frame length (slotsPerFrame
 * adjusted). Dispatch is on arrival whatever the slot (edge-cloud-v2); the slot sets how often
 * rewards are computed and states recorded. Throws UsageError naming `flag` when the frame is not a
 * whole number of such slots.
 */
export function scenarioWithSlot(s: Scenario, slotS: number, flag = '--slot'): Scenario {
  const frameS = s.slotS * s.slotsPerFrame;
  const n = Math.round(frameS / slotS);
  if (!(slotS > 0) || !Number.isFinite(slotS) || n < 1 || Math.abs(n * slotS - frameS) > 1e-9 * frameS) {
    throw new UsageError(`${flag}: must divide the ${frameS} s frame of scenario ${s.name} into whole slots, got ${slotS}`);
  }
  return { ...s, slotS: frameS / n, slotsPerFrame: n };
}

export function topologyOf(s: Scenario): { numEaps: number; numNodes: number; numServices: number; nodeEap: number[] } {
  const nodeEap: number[] = [];
  s.eaps.forEach((e, b) => e.nodes.forEach(() => nodeEap.push(b)));
  return { numEaps: s.eaps.length, numNodes: nodeEap.length, numServices: s.services.length, nodeEap };
}

/**
 * A scenario's dispatch targets as every ClusterView holds them (the simulator's Cluster, the
 * agent's LocalClusterView, the orchestrator's ReportView extend it): targets 0..numNodes-1 are
 * the edge nodes, numNodes (= cloudTarget) the cloud; `nodeEap(n)` the eAP of edge node n.
 */
export class ScenarioTargets {
  readonly numEaps: number;
  readonly numNodes: number;
  readonly numServices: number;
  readonly numTargets: number;
  readonly cloudTarget: number;
  /** eAP of each edge node. */
  readonly eapOfNode: Int32Array;

  constructor(readonly scenario: Scenario) {
    const topo = topologyOf(scenario);
    this.numEaps = topo.numEaps;
    this.numNodes = topo.numNodes;
    this.numServices = topo.numServices;
    this.numTargets = topo.numNodes + 1;
    this.cloudTarget = topo.numNodes;
    this.eapOfNode = Int32Array.from(topo.nodeEap);
  }

  nodeEap(node: number): number {
    return this.eapOfNode[node];
  }
}

/**
 * Capacity arrays indexed by dispatch target (0..numNodes-1 edge nodes, numNodes the cloud as one
 * pool) and by service, for the ClusterView implementations (simulator and agent).
 */
export function capacityArrays(s: Scenario): { cpu: Float64Array; mem: Float64Array; svcCpu: Float64Array; svcMem: Float64Array } {
  const nodes = s.eaps.flatMap((e) => e.nodes);
  const cpu = new Float64Array(nodes.length + 1);
  const mem = new Float64Array(nodes.length + 1);
  nodes.forEach((n, i) => {
    cpu[i] = n.cpuCores;
    mem[i] = n.memGB;
  });
  cpu[nodes.length] = s.cloud.vms * s.cloud.vcpuPerVm;
  mem[nodes.length] = s.cloud.vms * s.cloud.memGBPerVm;
  return {
    cpu,
    mem,
    svcCpu: Float64Array.from(s.services.map((x) => x.cpuCores)),
    svcMem: Float64Array.from(s.services.map((x) => x.memGB)),
  };
}
