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

/** Whether a --scenario value (or a lesson's "scenario") names a file (a path or a .json name) rather than a built-in. */
export function isScenarioFile(nameOrFile: string): boolean {
  if (Object.prototype.hasOwnProperty.call(BUILT_INS, nameOrFile)) return false;
  return nameOrFile.includes('/') || nameOrFile.includes('\\') || nameOrFile.endsWith('.json');
}

/** Resolve `--scenario <name|file>`: a built-in name, or a JSON file validated field by field. */
export function loadScenario(nameOrFile: string): Scenario {
  if (Object.prototype.hasOwnProperty.call(BUILT_INS, nameOrFile)) {
    return validateScenario(BUILT_INS[nameOrFile], `built-in scenario ${nameOrFile}`);
  }
  if (!isScenarioFile(nameOrFile)) {
    throw new UsageError(`--scenario: unknown scenario "${nameOrFile}" (built-ins: ${BUILT_IN_SCENARIOS.join(', ')}, or a .json file)`);
  }
  const text = readInputFile(nameOrFile, '--scenario');
  let raw: unknown;
  try {
    raw = JSON.parse(text); // readInputFile has dropped a UTF-8 byte order mark
  } catch (e) {
    // the parser quotes the file: its control characters are escaped, not printed to the terminal
    throw new UsageError(`${nameOrFile}: not valid JSON (${escapeControl((e as Error).message)})`);
  }
  const s = validateScenario(raw, nameOrFile);
  if (!s.name) s.name = path.basename(nameOrFile, '.json');
  return s;
}

type Obj = Record<string, unknown>;

function isObj(v: unknown): v is Obj {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** `s` with its control characters (C0, DEL, C1) written as \uXXXX escapes, safe to print. */
function escapeControl(s: string): string {
  // eslint-disable-next-line no-control-regex
  return s.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/**
 * Bounds on a scenario's size, so that what the simulator, the agent and the orchestrator build from
 * it fits in memory and time and in their Int32 counters. Generous for real clusters (the built-in
 * `large` is 10 eAPs, 100 nodes, 30 services and ~31,000 requests a frame): measured with
 * `kais eval --policies lec/hpa --frames 1`, a scenario at the limits takes up to about 1 GB and
 * seconds to tens of seconds a frame; past them eval ran out of memory (100,000 services), threw a
 * RangeError (100,000 eAPs), took 10 GB (200,000 nodes) or never finished a frame.
 */
export const SCENARIO_LIMITS = {
  eaps: 1000,
  /** Edge nodes in all eAPs together. */
  nodes: 5000,
  services: 1000,
  /** nodes x services: per (node, service) queues and counters (5000 x 1000 took 4.5 GB and a minute to start). */
  nodeServices: 200_000,
  /** eAPs x nodes x services: each eAP's view of the cluster (1000 x 1000 x 200 took 3 GB). */
  eapNodeServices: 20_000_000,
  /**
   * slotsPerFrame x (nodes + 1) x (eAPs + services): the per-slot bookkeeping of one frame, each
   * eAP's view of every target and the per-(target, service) state (1e4 slots of 1000 eAPs x 1000
   * nodes took 40 s a frame).
   */
  slotCellsPerFrame: 5_000_000_000,
  /** Expected requests per frame at load 1, workload.ratePerS x slotS x slotsPerFrame (3.6e9 never finished). */
  requestsPerFrame: 5_000_000,
  cloudVms: 100_000,
  vcpuPerVm: 1024,
  memGBPerVm: 65_536,
  /**
   * The cloud's vCPUs (vms x vcpuPerVm): one pool holding floor(vCPUs / cpuCores) replicas of each
   * service, counted in Int32 arrays; 1e6 vCPUs / 0.01 cores (the smallest service) is 1e8, well
   * below 2^31 (2e9 vCPUs wrapped around and gave wrong results silently).
   */
  cloudVcpus: 1_000_000,
  /** Replicas of all services placed at t = 0 (initialReplicasPerEap x eAPs x services). */
  initialReplicas: 1_000_000,
  /** A service's arrival weight: 0, or in [minServiceWeight, serviceWeight] (only ratios matter). */
  serviceWeight: 1e6,
  minServiceWeight: 1e-6,
} as const;

const fmt = (n: number): string => n.toLocaleString('en-US');

/** Per-slot bookkeeping cells of a topology, see SCENARIO_LIMITS.slotCellsPerFrame. */
const slotCellsOf = (numNodes: number, numEaps: number, numServices: number): number => (numNodes + 1) * (numEaps + numServices);

/** A value as JSON for a message, cut to 60 characters. */
function shortJson(v: unknown): string {
  const j = JSON.stringify(v) ?? String(v);
  return j.length > 60 ? `${j.slice(0, 57)}...` : j;
}

const KNOWN_FIELDS = {
  '(root)': [
    'name',
    'description',
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
  ],
  eap: ['nodes'],
  node: ['cpuCores', 'memGB'],
  cloud: ['vms', 'vcpuPerVm', 'memGBPerVm'],
  network: ['deviceToEap', 'eapToOwnNode', 'eapToOtherNode', 'edgeToCloud'],
  link: ['latencyMs', 'mbps'],
  service: ['cpuCores', 'memGB', 'weight', 'workScale'],
  workload: ['ratePerS', 'inputMB', 'deadlineBaseS', 'deadlineSlack'],
} as const;

/** Validates every field; throws a UsageError naming the source and the field path. */
export function validateScenario(raw: unknown, source: string): Scenario {
  const L = SCENARIO_LIMITS;
  const fail = (field: string, problem: string): never => {
    throw new UsageError(escapeControl(`${source}: field "${field}" ${problem}`), 'KAIS_ERR_SCENARIO');
  };
  /** An object at `field` with no key outside `known` (a misspelt field is refused, not ignored). */
  const obj = (v: unknown, field: string, known: readonly string[]): Obj => {
    if (!isObj(v)) return fail(field, 'must be an object');
    for (const k of Object.keys(v)) {
      if (!known.includes(k)) {
        const key = k.length > 60 ? `${k.slice(0, 57)}...` : k;
        const at = field === '(root)' ? key : `${field}.${key}`;
        fail(at, `is not a known field (known: ${known.join(', ')})`);
      }
    }
    return v;
  };
  const num = (o: Obj, key: string, field: string, min: number, max = Infinity, integer = false): number => {
    const v = o[key];
    if (typeof v !== 'number' || !Number.isFinite(v)) return fail(field, `must be a number, got ${shortJson(v)}`);
    if (integer && !Number.isInteger(v)) return fail(field, `must be an integer, got ${v}`);
    if (v < min || v > max) return fail(field, `must be in [${min}, ${max}], got ${v}`);
    return v;
  };
  const array = (v: unknown, field: string, max: number, what: string): unknown[] => {
    if (!Array.isArray(v) || v.length === 0) return fail(field, 'must be a non-empty array');
    if (v.length > max) return fail(field, `has ${fmt(v.length)} ${what}, more than the ${fmt(max)} a scenario may have`);
    return v;
  };
  const link = (o: Obj, key: string, field: string): LinkSpec => {
    const l = obj(o[key], field, KNOWN_FIELDS.link);
    return { latencyMs: num(l, 'latencyMs', `${field}.latencyMs`, 0, 60000), mbps: num(l, 'mbps', `${field}.mbps`, 1e-6) };
  };

  const r = obj(raw, '(root)', KNOWN_FIELDS['(root)']);
  // dispatchBudgetPerSlot: a per-eAP dispatch budget per slot until edge-cloud-v1; accepted and
  // ignored since the simulator dispatches on arrival (edge-cloud-v2), so older files still load
  if (r.dispatchBudgetPerSlot !== undefined) num(r, 'dispatchBudgetPerSlot', 'dispatchBudgetPerSlot', 1, 1e6, true);
  if (r.name !== undefined && typeof r.name !== 'string') fail('name', 'must be a string');
  // the name is printed (eval's tables, logs): no terminal escapes or line breaks
  // eslint-disable-next-line no-control-regex
  if (typeof r.name === 'string' && /[\u0000-\u001f\u007f-\u009f]/.test(r.name)) {
    fail('name', `must not contain control characters, got ${shortJson(r.name)}`);
  }
  if (r.description !== undefined && typeof r.description !== 'string') fail('description', 'must be a string');

  let numNodes = 0;
  const eaps = array(r.eaps, 'eaps', L.eaps, 'eAPs').map((e, b) => {
    const eo = obj(e, `eaps[${b}]`, KNOWN_FIELDS.eap);
    const nodesIn = array(eo.nodes, `eaps[${b}].nodes`, L.nodes, 'nodes');
    numNodes += nodesIn.length;
    if (numNodes > L.nodes)
      fail('eaps', `holds more than ${fmt(L.nodes)} edge nodes in all (the most a scenario may have), past eaps[${b}]`);
    return {
      nodes: nodesIn.map((n, i) => {
        const no = obj(n, `eaps[${b}].nodes[${i}]`, KNOWN_FIELDS.node);
        return {
          cpuCores: num(no, 'cpuCores', `eaps[${b}].nodes[${i}].cpuCores`, 0.01, 1024),
          memGB: num(no, 'memGB', `eaps[${b}].nodes[${i}].memGB`, 0.01, 65536),
        };
      }),
    };
  });
  const cloudO = obj(r.cloud, 'cloud', KNOWN_FIELDS.cloud);
  const netO = obj(r.network, 'network', KNOWN_FIELDS.network);
  const services = array(r.services, 'services', L.services, 'services').map((sv, w) => {
    const so = obj(sv, `services[${w}]`, KNOWN_FIELDS.service);
    return {
      cpuCores: num(so, 'cpuCores', `services[${w}].cpuCores`, 0.01, 1024),
      memGB: num(so, 'memGB', `services[${w}].memGB`, 0.001, 65536),
      weight: so.weight === undefined ? 1 : num(so, 'weight', `services[${w}].weight`, 0, L.serviceWeight),
      workScale: so.workScale === undefined ? 1 : num(so, 'workScale', `services[${w}].workScale`, 1e-6),
    };
  });
  const wl = obj(r.workload, 'workload', KNOWN_FIELDS.workload);
  const s: Scenario = {
    name: typeof r.name === 'string' ? r.name : '',
    slotS: num(r, 'slotS', 'slotS', 0.001, 3600),
    slotsPerFrame: num(r, 'slotsPerFrame', 'slotsPerFrame', 1, 1e6, true),
    scaleNodesPerFrame: num(r, 'scaleNodesPerFrame', 'scaleNodesPerFrame', 0, 1e6, true),
    eaps,
    cloud: {
      vms: num(cloudO, 'vms', 'cloud.vms', 1, L.cloudVms, true),
      vcpuPerVm: num(cloudO, 'vcpuPerVm', 'cloud.vcpuPerVm', 0.01, L.vcpuPerVm),
      memGBPerVm: num(cloudO, 'memGBPerVm', 'cloud.memGBPerVm', 0.01, L.memGBPerVm),
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
      // out); deadlines are not (a test's "never binds" is 1e9 s). 0 would draw no request at all.
      ratePerS: num(wl, 'ratePerS', 'workload.ratePerS', 0, 100_000),
      inputMB: num(wl, 'inputMB', 'workload.inputMB', 0),
      deadlineBaseS: num(wl, 'deadlineBaseS', 'workload.deadlineBaseS', 0),
      deadlineSlack: num(wl, 'deadlineSlack', 'workload.deadlineSlack', 0),
    },
  };
  if (!(s.workload.ratePerS >= MIN_RATE_PER_S))
    fail('workload.ratePerS', `must be at least ${MIN_RATE_PER_S} (requests/s at load 1), got ${s.workload.ratePerS}`);

  // arrival weights: only their ratios matter; each is 0 (no requests) or in [1e-6, 1e6], so their
  // sum is a finite positive number and no ratio underflows (1e308s summed to Infinity, 5e-324
  // lost its precision)
  services.forEach((x, w) => {
    if (x.weight !== 0 && x.weight < L.minServiceWeight) {
      fail(`services[${w}].weight`, `must be 0 or in [${L.minServiceWeight}, ${L.serviceWeight}], got ${x.weight}`);
    }
  });
  if (services.every((x) => x.weight === 0)) fail('services', 'all have weight 0: at least one service must get requests');

  // sizes: memory and time of everything built from the scenario
  const W = services.length;
  const E = eaps.length;
  if (numNodes * W > L.nodeServices) {
    fail(
      'services',
      `${W} services on ${numNodes} edge nodes make ${fmt(numNodes * W)} (node, service) pairs, more than ${fmt(L.nodeServices)}`,
    );
  }
  if (E * numNodes * W > L.eapNodeServices) {
    fail('eaps', `${E} eAPs x ${numNodes} edge nodes x ${W} services is ${fmt(E * numNodes * W)}, more than ${fmt(L.eapNodeServices)}`);
  }
  const slotCells = s.slotsPerFrame * slotCellsOf(numNodes, E, W);
  if (slotCells > L.slotCellsPerFrame) {
    fail(
      'slotsPerFrame',
      `${s.slotsPerFrame} slots x (${numNodes} edge nodes + 1) x (${E} eAPs + ${W} services) = ${fmt(slotCells)} per frame, more than ${fmt(L.slotCellsPerFrame)} (the per-slot bookkeeping of a frame)`,
    );
  }
  const perFrame = s.workload.ratePerS * s.slotS * s.slotsPerFrame;
  if (perFrame > L.requestsPerFrame) {
    fail(
      'workload.ratePerS',
      `makes ${s.workload.ratePerS} requests/s x ${s.slotS} s slots x ${s.slotsPerFrame} slots = ${fmt(Math.round(perFrame))} requests per frame at load 1, more than ${fmt(L.requestsPerFrame)} (lower the rate, slotS or slotsPerFrame)`,
    );
  }
  const cloudCpu = s.cloud.vcpuPerVm * s.cloud.vms;
  if (cloudCpu > L.cloudVcpus) {
    fail('cloud', `vms x vcpuPerVm = ${s.cloud.vms} x ${s.cloud.vcpuPerVm} = ${fmt(cloudCpu)} vCPUs, more than ${fmt(L.cloudVcpus)}`);
  }
  // the initial placement puts initialReplicasPerEap of every service on each eAP: within the cap
  if (s.initialReplicasPerEap * E > s.maxReplicasPerService) {
    fail(
      'initialReplicasPerEap',
      `${s.initialReplicasPerEap} x ${E} eAPs = ${s.initialReplicasPerEap * E} initial replicas of each service, more than maxReplicasPerService (${s.maxReplicasPerService})`,
    );
  }
  if (s.initialReplicasPerEap * E * W > L.initialReplicas) {
    fail(
      'initialReplicasPerEap',
      `${s.initialReplicasPerEap} x ${E} eAPs x ${W} services = ${fmt(s.initialReplicasPerEap * E * W)} replicas at t = 0, more than ${fmt(L.initialReplicas)}`,
    );
  }

  // every service must be servable somewhere: on an edge node with both its CPU and its memory, or
  // in the cloud (one pool); placement goes by the same rule (a replica never lands where a request
  // of it could not start)
  const nodes = eaps.flatMap((e) => e.nodes);
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
/** The fewest requests per second a workload may have (scenario rate x load): about one every 12 days. */
export const MIN_RATE_PER_S = 1e-6;

/**
 * A load factor the scenario can be run at: its expected requests per frame (workload.ratePerS x
 * the frame's seconds x load) within SCENARIO_LIMITS.requestsPerFrame, the limit a scenario file is
 * held to at load 1 (validateScenario). UsageError naming `flag`.
 */
export function checkLoad(s: Scenario, load: number, flag = '--load'): void {
  const perFrame = s.workload.ratePerS * s.slotS * s.slotsPerFrame * load;
  // far below one request a day is no workload, and near the smallest double the generator's
  // arrival windows overflowed to Infinity and it never ended (1e-308)
  if (!(s.workload.ratePerS * load >= MIN_RATE_PER_S))
    throw new UsageError(
      `${flag}: ${load} x scenario ${s.name}'s ${s.workload.ratePerS} requests/s is below ${MIN_RATE_PER_S} requests/s (no request would arrive)`,
    );
  if (perFrame > SCENARIO_LIMITS.requestsPerFrame) {
    throw new UsageError(
      `${flag}: ${load} x scenario ${s.name}'s ${fmt(Math.round(perFrame / load))} requests per frame = ${fmt(Math.round(perFrame))}, more than ${fmt(SCENARIO_LIMITS.requestsPerFrame)}`,
    );
  }
}

export function scenarioWithSlot(s: Scenario, slotS: number, flag = '--slot'): Scenario {
  const frameS = s.slotS * s.slotsPerFrame;
  const n = Math.round(frameS / slotS);
  if (!(slotS > 0) || !Number.isFinite(slotS) || n < 1 || Math.abs(n * slotS - frameS) > 1e-9 * frameS) {
    throw new UsageError(`${flag}: must divide the ${frameS} s frame of scenario ${s.name} into whole slots, got ${slotS}`);
  }
  const topo = topologyOf(s);
  const cells = n * slotCellsOf(topo.numNodes, topo.numEaps, topo.numServices);
  if (cells > SCENARIO_LIMITS.slotCellsPerFrame) {
    throw new UsageError(
      `${flag}: ${slotS} s makes ${n} slots a frame of scenario ${s.name}, x (${topo.numNodes} edge nodes + 1) x (${topo.numEaps} eAPs + ${topo.numServices} services) = ${fmt(cells)}, more than ${fmt(SCENARIO_LIMITS.slotCellsPerFrame)}`,
    );
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
