/**
 * `kais node [--scenario kais] [--speed x] [--admin-port N] [--faults <json>] [--seed N]`: the emulated edge cluster (every edge
 * node and the cloud of the scenario, one HTTP server each on a free port) as one process; see
 * emulated-cluster.ts for the service model. Prints one JSON line on stdout once listening,
 * `{"ready":true,"nodes":[url, ...],"cloud":url,"admin":url}` (the first two keys are the
 * `--targets` file of `kais agent`), and exits 0 on SIGTERM/SIGINT. `--faults` is a JSON list of
 * scripted node failures `[{"node": 3, "startS": 70, "durationS": 30, "precursorS": 20}]` (the
 * simulator's fault model, shared/faults.ts: seconds of scenario time from start; precursorS, the
 * abnormal telemetry before the failure, defaults to 20).
 */
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { exitWithParent } from '../lifecycle';
import { UsageError } from '../shared/errors';
import { loadScenario, topologyOf } from '../shared/scenario';
import { validateFaults, type Fault } from '../shared/faults';
import { EmulatedCluster } from './emulated-cluster';

interface NodeArgs {
  scenario: string;
  speed: number;
  adminPort: number;
  faults?: string;
  seed: number;
}

export const nodeCommand: CommandModule<object, NodeArgs> = {
  command: 'node',
  describe: 'run the emulated edge nodes and cloud of a scenario (HTTP servers with service replicas)',
  builder: (y: Argv) =>
    y
      .option('scenario', { type: 'string', default: 'kais', describe: 'built-in scenario or a .json file' })
      .option('speed', { type: 'number', default: 1, describe: 'time scale of nominal service times' })
      .option('admin-port', { type: 'number', default: 0, describe: 'port of the admin server (placement, stats)' })
      .option('faults', { type: 'string', describe: 'JSON list of node failures: [{"node":3,"startS":70,"durationS":30,"precursorS":20}]' })
      .option('seed', { type: 'number', default: 1, describe: 'seed of the telemetry series' }) as unknown as Argv<NodeArgs>,
  handler: async (a: ArgumentsCamelCase<NodeArgs>) => {
    const scenario = loadScenario(a.scenario);
    if (!(a.speed > 0) || !Number.isFinite(a.speed)) throw new UsageError(`--speed: must be a positive number, got ${a.speed}`);
    if (!Number.isInteger(a.adminPort) || a.adminPort < 0 || a.adminPort > 65535) throw new UsageError(`--admin-port: must be an integer in 0..65535, got ${a.adminPort}`);
    let faults: Fault[] = [];
    if (a.faults !== undefined) {
      try {
        faults = validateFaults(JSON.parse(a.faults), topologyOf(scenario).numNodes);
      } catch (e) {
        throw new UsageError(`--faults: ${e instanceof SyntaxError ? 'not JSON (' + e.message + ')' : (e as Error).message}`);
      }
    }
    let cluster: EmulatedCluster;
    try {
      cluster = new EmulatedCluster({ scenario, speed: a.speed, adminPort: a.adminPort, faults, seed: a.seed });
    } catch (e) {
      throw new UsageError(`--faults: ${(e as Error).message}`);
    }
    await cluster.listen();
    process.stdout.write(`${JSON.stringify({ ready: true, nodes: cluster.nodeUrls, cloud: cluster.cloudUrl, admin: cluster.adminUrl })}\n`);
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', () => resolve());
      process.once('SIGINT', () => resolve());
      exitWithParent(resolve);
    });
    await cluster.close();
    process.exit(0);
  },
};
