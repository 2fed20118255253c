/**
 * `kais up` across hosts of their own (issue 19 "Must show": live / predicted in namespaces against
 * the loopback run): the roles of `kais up` placed in network namespaces (test/support/netns.ts)
 * instead of on one loopback, with kais up's requests, prediction and accounting.
 *
 * Layout (one lab):
 * - "root" (this process's namespace): the emulated cluster (a child process: the edge nodes, the
 *   cloud and the admin server, as `kais node` is in kais up) and the load generator (this
 *   process, as kais up is its own);
 * - "C": `kais orchestrator` (its executor: the cluster's admin API over link root-C);
 * - "E<e>": `kais agent` of eAP e; its WAN to C: link C-E<e> with netem (delay, loss) on both sides
 *   when the kernel has netem, else a user-space relay in E<e> over that link
 *   (test/support/wan-relay.ts); its LAN: link root-E<e> (devices and the cluster's nodes), plain.
 * With `loopback: true` every role runs in "root" on 127.0.0.1 (the baseline, as kais up runs).
 *
 * Same as kais up (launcher/up.ts): the requests (`buildRequests` with the scenario, workload,
 * seed, load and duration x speed), the prediction (`predictRate`, the agents' view), the
 * orchestrator config and the agents' flags (a heuristic `--policy`: no model, learner off; cmmac:
 * the shipped model or `checkpoint` as weights v1, its actor head, online learning with kais up's
 * --explore and --learn-batch defaults unless `learn: false`), and the load generator itself
 * (launcher/replay.ts: each request reaches its agent at arrival + upload, with the time left to
 * its deadline; completedInTime / late / refused / unanswered from the device's side).
 * Not the same: the load starts once every agent holds a placement (and with cmmac the weights;
 * kais up starts it once the agents are up), the orchestrator's detector is off, no TLS, no
 * faults, the cluster started with `node -e` on 0.0.0.0 (kais node listens on 127.0.0.1 only).
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { Replay, type Counts } from '../../launcher/replay';
import { predictRate, UP_SPEC } from '../../launcher/up';
import type { LivePolicyName } from '../../shared/dispatch';
import type { Request } from '../../shared/domain';
import { checkpointHead, defaultModelPath } from '../../shared/nets/actor-file';
import type { OrchestrationPolicyName } from '../../shared/orchestration';
import { loadScenario, topologyOf } from '../../shared/scenario';
import { buildRequests, type WorkloadName } from '../../training/workload';
import { NetnsLab, readyLine, type Link } from './netns';
import { WAN_RELAY_JS } from './wan-relay';

export interface NetnsUpOptions {
  lab: NetnsLab;
  /** A private folder for configs, tokens, the store. */
  dir: string;
  /** dist/kais.js. */
  bin: string;
  scenario: string;
  /** The agents' --policy and the prediction's: cmmac (the model) or a heuristic of the simulator. */
  policy: LivePolicyName;
  /** cmmac: the model published as weights v1 (default: the one shipped for the scenario, as kais up). */
  checkpoint?: string;
  /** cmmac: the orchestrator learns online and the agents explore (kais up's --learn, default on, with its --explore and --learn-batch defaults). */
  learn?: boolean;
  orchestration: OrchestrationPolicyName;
  workload: WorkloadName;
  seed: number;
  load: number;
  speed: number;
  /** Seconds of load, real time. */
  durationS: number;
  /** One-way WAN delay (ms) and loss (percent; the relay holds that share of chunks 200 ms instead). */
  wan: { delayMs: number; lossPct: number };
  /** Every role on 127.0.0.1 in this namespace: the loopback baseline. */
  loopback?: boolean;
  log?: (line: string) => void;
}

/** The fields of kais up's summary this harness reproduces. */
export interface NetnsUpSummary extends Counts {
  throughputRate: number;
  evalPolicy: string;
  evalThroughputRate: number;
  vsEval: number;
  /** Each agent's counts and the versions it holds at the end (weightVersion: null with a heuristic). */
  perEap: (Counts & { placementVersion: number | null; weightVersion: number | null })[];
  /** Whether the WAN links were shaped by netem (false: the relay). */
  netem: boolean;
}

/** What the harness reads of an agent's /healthz. */
interface Health {
  placementVersion: number | null;
  weightVersion: number | null;
}

const CLUSTER_JS = `
const { EmulatedCluster } = require(process.argv[1]);
const { loadScenario } = require(process.argv[2]);
const o = JSON.parse(process.argv[3]);
const c = new EmulatedCluster({ scenario: loadScenario(o.scenario), speed: o.speed, seed: o.seed, host: '0.0.0.0', adminToken: o.adminToken });
c.listen().then(() => process.stdout.write(JSON.stringify({ ready: true, nodes: c.nodeUrls, cloud: c.cloudUrl, admin: c.adminUrl }) + '\\n'));
process.on('SIGTERM', () => c.close().then(() => process.exit(0)));
`;

function getJson<T>(url: string): Promise<T | null> {
  return new Promise((resolve) => {
    const req = http.get(url, { agent: false, timeout: 2000 }, (res) => {
      let t = '';
      res.on('data', (c: Buffer) => (t += c.toString()));
      res.on('end', () => {
        try {
          resolve(JSON.parse(t) as T);
        } catch {
          resolve(null);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(null));
  });
}

/** Starts every role in its namespace, replays the requests, returns kais up's summary fields. The lab is the caller's to destroy. */
export async function runNetnsUp(o: NetnsUpOptions): Promise<NetnsUpSummary> {
  const log = o.log ?? (() => undefined);
  const lab = o.lab;
  const scenario = loadScenario(o.scenario);
  const E = topologyOf(scenario).numEaps;
  const requests: Request[] = buildRequests({
    scenario,
    workload: o.workload,
    tracePath: null,
    seed: o.seed,
    load: o.load,
    durationS: o.durationS * o.speed,
    warn: log,
  });
  // cmmac as kais up runs it: a model (the shipped one by default), its actor head, online learning
  const checkpoint = o.policy === 'cmmac' ? (o.checkpoint ?? defaultModelPath(scenario, o.orchestration) ?? undefined) : undefined;
  if (o.policy === 'cmmac' && !checkpoint) throw new Error(`cmmac: no model shipped for ${o.scenario}; pass checkpoint`);
  const actorHead = checkpoint ? checkpointHead(checkpoint) : 'softplus1';
  const learning = checkpoint !== undefined && (o.learn ?? UP_SPEC.learn.default!);
  const predicted = predictRate(scenario, requests, { seed: o.seed, orchestration: o.orchestration, gpg: undefined }, o.policy, checkpoint);
  log(`prediction ${predicted.policy}: ${predicted.rate.toFixed(3)} for ${requests.length} requests`);

  // ---- hosts and links ----
  const local = (): Link => ({
    a: 'root',
    b: 'root',
    aAddr: '127.0.0.1',
    bAddr: '127.0.0.1',
    shaped: true,
    cut: () => {},
    restore: () => {},
  });
  const host = (h: string) => (o.loopback ? 'root' : h);
  if (!o.loopback) {
    lab.addHost('C');
    for (let e = 0; e < E; e++) lab.addHost(`E${e}`);
  }
  const shape = { delayMs: o.wan.delayMs, lossPct: o.wan.lossPct / 2 }; // netem on both sides: the loss twice
  const wan = Array.from({ length: E }, (_, e) => (o.loopback ? local() : lab.link('C', `E${e}`, shape)));
  const lan = Array.from({ length: E }, (_, e) => (o.loopback ? local() : lab.link('root', `E${e}`)));
  const ctl = o.loopback ? local() : lab.link('root', 'C');

  // ---- the emulated cluster (kais node's part), a process of its own in root ----
  const dist = path.dirname(o.bin);
  const adminToken = 'netns-up-node-admin-token-0123456789';
  const clusterProc = lab.spawn('root', process.execPath, [
    '-e',
    CLUSTER_JS,
    path.join(dist, 'orchestrator', 'emulated-cluster.js'),
    path.join(dist, 'shared', 'scenario.js'),
    JSON.stringify({ scenario: o.scenario, speed: o.speed, seed: o.seed, adminToken }),
  ]);
  const cluster = await readyLine<{ nodes: string[]; cloud: string; admin: string }>(clusterProc, 'emulated cluster');

  // ---- orchestrator in C, as kais up configures it ----
  const tokens = Array.from({ length: E }, (_, e) => `netns-up-agent-token-${e}-0123456789`);
  const configFile = path.join(o.dir, 'orchestrator.json');
  fs.writeFileSync(
    configFile,
    JSON.stringify({
      agentTokens: Object.fromEntries(tokens.map((t, e) => [e, t])),
      scenario: o.scenario,
      orchestration: o.orchestration,
      speed: o.speed,
      executor: cluster.admin.replace('0.0.0.0', ctl.aAddr),
      executorToken: adminToken,
      checkpoint: checkpoint ? path.resolve(checkpoint) : null,
      actorHead,
      learner: learning ? 'cmmac' : 'none',
      learnBatch: UP_SPEC.learnBatch.default,
      detector: 'none',
    }),
    { mode: 0o600 },
  );
  const orch = lab.spawn(host('C'), process.execPath, [
    o.bin,
    'orchestrator',
    '--config',
    configFile,
    '--db',
    path.join(o.dir, 'o.db'),
    '--host',
    '0.0.0.0',
  ]);
  const orchReady = await readyLine<{ port: number }>(orch, 'kais orchestrator');

  // ---- one agent per eAP in E<e>, its WAN to C, its LAN to root ----
  const agentUrls: string[] = [];
  for (let e = 0; e < E; e++) {
    const onLan = (u: string) => u.replace('0.0.0.0', lan[e].aAddr);
    const targetsFile = path.join(o.dir, `targets-${e}.json`);
    fs.writeFileSync(targetsFile, JSON.stringify({ nodes: cluster.nodes.map(onLan), cloud: onLan(cluster.cloud) }));
    const tokenFile = path.join(o.dir, `token-${e}`);
    fs.writeFileSync(tokenFile, `${tokens[e]}\n`, { mode: 0o600 });
    let wsUrl = `ws://${wan[e].aAddr}:${orchReady.port}`;
    if (!wan[e].shaped) {
      const relay = lab.spawn(host(`E${e}`), process.execPath, [
        '-e',
        WAN_RELAY_JS,
        JSON.stringify({
          port: 0,
          host: wan[e].aAddr,
          targetPort: orchReady.port,
          delayMs: o.wan.delayMs,
          holdShare: o.wan.lossPct / 100,
          holdMs: 200,
          seed: 7 + e,
        }),
      ]);
      wsUrl = `ws://127.0.0.1:${(await readyLine<{ port: number }>(relay, 'WAN relay')).port}`;
    }
    const agent = lab.spawn(host(`E${e}`), process.execPath, [
      o.bin,
      'agent',
      '--orchestrator',
      wsUrl,
      '--eap',
      String(e),
      '--targets',
      targetsFile,
      '--token-file',
      tokenFile,
      '--scenario',
      o.scenario,
      '--speed',
      String(o.speed),
      '--cache',
      path.join(o.dir, `agent-${e}`),
      '--actor-head',
      actorHead,
      '--explore',
      String(learning ? UP_SPEC.explore.default : 0),
      '--policy',
      o.policy,
      '--seed',
      String(o.seed),
      '--host',
      '0.0.0.0',
    ]);
    const { port } = await readyLine<{ port: number }>(agent, `kais agent ${e}`);
    agentUrls.push(`http://${lan[e].bAddr}:${port}`);
  }
  // kais up starts the load once the agents are up; here also once each holds a placement, and
  // with cmmac the weights (the WAN is slower)
  const holds = (h: Health | null) => h?.placementVersion != null && (!checkpoint || h.weightVersion != null);
  const deadline = Date.now() + 30_000;
  for (const u of agentUrls) {
    while (!holds(await getJson<Health>(`${u}/healthz`))) {
      if (Date.now() > deadline)
        throw new Error(`agent ${u} holds no placement${checkpoint ? ' or weights' : ''} after 30 s\n${lab.tails()}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  // ---- the load generator: kais up's (launcher/replay.ts) ----
  const replay = new Replay({ scenario, requests, speed: o.speed, durationS: o.durationS, agentUrls });
  await replay.run();
  replay.close();
  const hs = await Promise.all(agentUrls.map((u) => getJson<Health>(`${u}/healthz`)));
  const { total, per } = replay;
  const throughputRate = total.sent > 0 ? total.completedInTime / total.sent : 0;
  return {
    ...total,
    throughputRate,
    evalPolicy: predicted.policy,
    evalThroughputRate: predicted.rate,
    vsEval: predicted.rate > 0 ? throughputRate / predicted.rate : 0,
    perEap: per.map((c, e) => ({ ...c, placementVersion: hs[e]?.placementVersion ?? null, weightVersion: hs[e]?.weightVersion ?? null })),
    netem: wan.every((l) => l.shaped) && !o.loopback,
  };
}
