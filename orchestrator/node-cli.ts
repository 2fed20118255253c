/**
 * `kais node [--scenario kais] [--speed x] [--admin-port N] [--admin-token-file F] [--faults <json>] [--seed N]`: the emulated edge cluster (every edge
 * node and the cloud of the scenario, one HTTP server each on a free port) as one process; see
 * emulated-cluster.ts for the service model. Prints one JSON line on stdout once listening,
 * `{"ready":true,"nodes":[url, ...],"cloud":url,"admin":url,"adminToken":..}` (the first two keys
 * are the `--targets` file of `kais agent`; adminToken only when the token was made here, not
 * given by --admin-token-file or $KAIS_NODE_ADMIN_TOKEN: the admin server's changes need it), and exits 0 on SIGTERM/SIGINT. `--faults` is a JSON list of
 * scripted node failures `[{"node": 3, "startS": 70, "durationS": 30, "precursorS": 20}]` (the
 * simulator's fault model, shared/faults.ts: seconds of scenario time from start; precursorS, the
 * abnormal telemetry before the failure, defaults to 20).
 */
import { randomBytes } from 'node:crypto';
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, resolveOptions, yargsOptions } from '../shared/config';
import { checkPortFree, listenProblem, resolveSecret, untilStopSignal } from '../shared/lifecycle';
import { SPEED_RANGE } from '../shared/domain';
import { UsageError } from '../shared/errors';
import { loadScenario, topologyOf } from '../shared/scenario';
import { validateFaults, type Fault } from '../shared/faults';
import { EmulatedCluster } from './emulated-cluster';
import { processLogger } from '../shared/log';
import { isBearerToken } from '../shared/auth';

/** Environment variable holding the admin token when --admin-token-file is not given. */
/** How long `kais node` lets running requests finish after SIGTERM/SIGINT (real ms; a request runs for its work / cores / speed). */
const NODE_DRAIN_MS = 10_000;

export const NODE_ADMIN_TOKEN_ENV = 'KAIS_NODE_ADMIN_TOKEN';

/** The options of `kais node`, declared once (shared/config.ts makes the flags, checks and docs). */
export const NODE_SPEC = {
  scenario: opt.string({ default: 'kais', describe: 'built-in scenario or a .json file' }),
  speed: opt.number({ default: 1, min: SPEED_RANGE.min, max: SPEED_RANGE.max, describe: 'time scale of nominal service times' }),
  adminPort: opt.port({ default: 0, describe: 'port of the admin server (placement, stats; 0: a free one)' }),
  adminTokenFile: opt.secretFile({
    defaultText: `$${NODE_ADMIN_TOKEN_ENV}, else a new random one printed as adminToken`,
    describe:
      "file whose first line is the token the admin server's changes (POST /scale, PUT /fault, PUT /placement) must carry as Authorization: Bearer",
  }),
  faults: opt.optString({ describe: 'JSON list of node failures: [{"node":3,"startS":70,"durationS":30,"precursorS":20}]' }),
  seed: opt.integer({ default: 1, describe: 'seed of the telemetry series' }),
};

export const nodeCommand: CommandModule<object, object> = {
  command: 'node',
  describe: 'run the emulated edge nodes and cloud of a scenario (HTTP servers with service replicas)',
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example('$0 node --scenario tiny', 'the nodes and cloud of the tiny scenario; the ready line is the --targets file of kais agent'),
      NODE_SPEC,
    ),
  handler: namingFlags(NODE_SPEC, async (argv) => {
    const a = resolveOptions(NODE_SPEC, argv);
    const scenario = loadScenario(a.scenario);
    // the admin server always checks a token: given (file, environment) or made here and printed
    const given = resolveSecret({
      fromFile: a.adminTokenFile,
      fileFlag: 'admin-token-file',
      inlineFlag: 'admin-token-file',
      env: NODE_ADMIN_TOKEN_ENV,
    });
    // a token no header can carry (binary bytes in the file, blanks in the variable) was taken, and
    // every change was then refused 401: say so at the door
    if (given && !isBearerToken(given))
      throw new UsageError(
        `--admin-token-file: ${a.adminTokenFile ? "the file's first line" : `$${NODE_ADMIN_TOKEN_ENV}`} is not a token an HTTP header can carry (Authorization: Bearer <token> needs printable ASCII without spaces)`,
      );
    const adminToken = given || randomBytes(24).toString('base64url');
    let faults: Fault[] = [];
    if (a.faults !== undefined) {
      try {
        faults = validateFaults(JSON.parse(a.faults), topologyOf(scenario).numNodes);
      } catch (e) {
        throw new UsageError(`--faults: ${e instanceof SyntaxError ? 'not JSON (' + e.message + ')' : (e as Error).message}`);
      }
    }
    await checkPortFree('admin-port', a.adminPort);
    let cluster: EmulatedCluster;
    try {
      cluster = new EmulatedCluster({ scenario, speed: a.speed, adminPort: a.adminPort, faults, seed: a.seed, adminToken });
    } catch (e) {
      throw new UsageError(`--faults: ${(e as Error).message}`);
    }
    await cluster.listen().catch((e: unknown) => {
      throw listenProblem(e, 'admin-port', a.adminPort) ?? e;
    });
    const logger = processLogger('node'); // JSON lines on stderr (shared/log.ts)
    logger.info(
      { scenario: scenario.name, nodes: cluster.nodeUrls.length, admin: cluster.adminUrl, faults: faults.length },
      `emulated cluster of ${scenario.name} up: ${cluster.nodeUrls.length} edge nodes and the cloud, admin ${cluster.adminUrl}`,
    );
    process.stdout.write(
      `${JSON.stringify({ ready: true, nodes: cluster.nodeUrls, cloud: cluster.cloudUrl, admin: cluster.adminUrl, ...(given ? {} : { adminToken }) })}\n`,
    );
    await untilStopSignal();
    // new requests get 503 "node stopping"; the running ones are answered first (up to NODE_DRAIN_MS), not reset
    logger.info(`stopping: no new requests; the running ones may finish for up to ${NODE_DRAIN_MS / 1000} s`);
    await cluster.close({ drainMs: NODE_DRAIN_MS });
    logger.info('stopped: every node server closed');
    process.exit(0);
  }),
};
