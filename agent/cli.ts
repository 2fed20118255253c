/**
 * `kais agent --orchestrator <ws-url> --eap <id> --targets <file> [--token T] [--port N]
 * [--scenario kais] [--cache <dir>] [--speed x] [--policy cmmac|lec|jsq|...] [--seed S] [--explore s]
 * [--experience explored|all|none] [--no-device-filters]`: one eAP's dispatcher as a process.
 *
 * Prints one JSON line on stdout once listening (`{"ready":true,"eap":..,"port":..}`), logs to
 * stderr, and on SIGTERM/SIGINT drains (answers every request it holds) and exits 0.
 * `--targets` is a JSON file `{"nodes": ["http://..", ...], "cloud": "http://.."}` (node id =
 * index), as `kais node` prints it.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { exitWithParent } from '../lifecycle';
import { UsageError } from '../shared/errors';
import { loadScenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import { checkLivePolicy, LIVE_POLICIES } from '../shared/dispatch';
import { EXPERIENCE_MODES, type ExperienceMode, type Targets } from './dispatcher';
import { startAgent } from './main';

interface AgentArgs {
  orchestrator: string;
  eap: number;
  targets: string;
  token: string;
  port: number;
  scenario: string;
  cache?: string;
  speed: number;
  actorHead: string;
  policy: string;
  seed: number;
  explore: number;
  experience: string;
  deviceFilters: boolean;
}

export function readTargets(file: string, numNodes: number): Targets {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new UsageError(`--targets: cannot read ${file} as JSON (${(e as Error).message})`);
  }
  const o = raw as { nodes?: unknown; cloud?: unknown };
  const isUrl = (u: unknown) => typeof u === 'string' && /^https?:\/\//.test(u);
  if (!o || !Array.isArray(o.nodes) || !o.nodes.every(isUrl) || !isUrl(o.cloud)) {
    throw new UsageError(`--targets: ${file} must hold {"nodes": [http URLs], "cloud": http URL}`);
  }
  if (o.nodes.length !== numNodes) throw new UsageError(`--targets: ${file} lists ${o.nodes.length} nodes, the scenario has ${numNodes}`);
  return { nodes: o.nodes as string[], cloud: o.cloud as string };
}

export const agentCommand: CommandModule<object, AgentArgs> = {
  command: 'agent',
  describe: 'run the dispatcher of one eAP (HTTP ingress, policy, proxy, orchestrator link)',
  builder: (y: Argv) =>
    y
      .option('orchestrator', { type: 'string', demandOption: true, describe: 'orchestrator URL, ws://host:port' })
      .option('eap', { type: 'number', demandOption: true, describe: 'eAP id of this agent' })
      .option('targets', { type: 'string', demandOption: true, describe: 'JSON file {nodes: [url], cloud: url} (kais node prints it)' })
      .option('token', { type: 'string', default: '', describe: 'token for the orchestrator hello' })
      .option('port', { type: 'number', default: 0, describe: 'HTTP port (0: a free one)' })
      .option('scenario', { type: 'string', default: 'kais', describe: 'built-in scenario or a .json file' })
      .option('cache', { type: 'string', describe: 'directory of the weights/placement cache (default: tmpdir/kais-agent-<eap>)' })
      .option('speed', { type: 'number', default: 1, describe: 'time scale of the replayed workload' })
      .option('actor-head', { type: 'string', default: 'softplus1', describe: 'actor head for weights frames that do not name one (older orchestrators): softplus1 (kais train default) or relu1' })
      .option('policy', { type: 'string', default: 'cmmac', describe: `dispatch policy: cmmac (the actor once weights arrive, lec before) or a heuristic of the simulator, which then decides everything and ignores weights (${LIVE_POLICIES.join(', ')})` })
      .option('seed', { type: 'number', default: 1, describe: "run seed: a heuristic's reset seed is derived from it and --eap (random, p2c, prob draw from it)" })
      .option('explore', { type: 'number', default: 0, describe: 'share of decisions drawn from the policy instead of its most likely target (0..1); the online learner learns from those' })
      .option('device-filters', { type: 'boolean', default: true, describe: "device filters on every node's GET /telemetry and QoS isolation on this agent's outcomes; excluded nodes leave the mask (--no-device-filters: off)" })
      .option('experience', { type: 'string', default: 'explored', describe: 'decisions sent to the orchestrator as experience: explored (the drawn ones, what the online learner uses), all, or none' }) as unknown as Argv<AgentArgs>,
  handler: async (a: ArgumentsCamelCase<AgentArgs>) => {
    const scenario = loadScenario(a.scenario);
    const topo = topologyOf(scenario);
    if (!Number.isInteger(a.eap) || a.eap < 0 || a.eap >= topo.numEaps) throw new UsageError(`--eap: must be an integer in 0..${topo.numEaps - 1}, got ${a.eap}`);
    if (!/^wss?:\/\//.test(a.orchestrator)) throw new UsageError(`--orchestrator: must be a ws:// URL, got ${a.orchestrator}`);
    if (!Number.isInteger(a.port) || a.port < 0 || a.port > 65535) throw new UsageError(`--port: must be an integer in 0..65535, got ${a.port}`);
    if (!(a.speed > 0) || !Number.isFinite(a.speed)) throw new UsageError(`--speed: must be a positive number, got ${a.speed}`);
    if (a.actorHead !== 'relu1' && a.actorHead !== 'softplus1') throw new UsageError(`--actor-head: relu1 or softplus1, got ${a.actorHead}`);
    const policy = checkLivePolicy(a.policy);
    if (!Number.isInteger(a.seed)) throw new UsageError(`--seed: must be an integer, got ${a.seed}`);
    if (!(a.explore >= 0 && a.explore <= 1)) throw new UsageError(`--explore: must be a share in 0..1, got ${a.explore}`);
    if (!(EXPERIENCE_MODES as readonly string[]).includes(a.experience)) throw new UsageError(`--experience: one of ${EXPERIENCE_MODES.join(', ')}, got ${a.experience}`);
    const targets = readTargets(a.targets, topo.numNodes);
    const log = (line: string) => process.stderr.write(`kais agent ${a.eap}: ${line}\n`);
    const agent = await startAgent({
      scenario,
      eap: a.eap,
      orchestratorUrl: a.orchestrator,
      targets,
      token: a.token,
      port: a.port,
      cacheDir: a.cache ?? path.join(os.tmpdir(), `kais-agent-${a.eap}`),
      speed: a.speed,
      actorHead: a.actorHead,
      policy,
      policySeed: a.seed,
      explore: a.explore,
      experience: a.experience as ExperienceMode,
      deviceFilters: a.deviceFilters,
      log,
    }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE') throw new UsageError(`--port: ${a.port} is already in use`);
      throw e;
    });
    process.stdout.write(`${JSON.stringify({ ready: true, eap: a.eap, port: agent.port })}\n`);
    await new Promise<void>((resolve) => {
      const stop = () => {
        log('draining');
        void agent.drain().then(resolve);
      };
      process.once('SIGTERM', stop);
      process.once('SIGINT', stop);
      exitWithParent(stop);
    });
    log('drained, exiting');
    process.exit(0);
  },
};
