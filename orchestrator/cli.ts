/**
 * `kais orchestrator --config <file> [--port N] [--db <file>]`: the central service (see main.ts).
 * Prints one JSON line on stdout once listening (`{"ready":true,"port":..,"url":"ws://..","httpPort":..,
 * "weightVersion":..,"placementVersion":..,"resumed":..}`), logs to stderr, exits 0 on
 * SIGTERM/SIGINT after closing every session and the store.
 */
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, resolveOptions, yargsOptions } from '../shared/config';
import { checkHost, checkPortFree, listenProblem, untilStopSignal } from '../shared/lifecycle';
import { UsageError } from '../shared/errors';
import { readConfig, startOrchestrator } from './main';
import { lineLogger, processLogger } from '../shared/log';

/** The options of `kais orchestrator`, declared once (shared/config.ts makes the flags, checks and docs). */
export const ORCHESTRATOR_SPEC = {
  config: opt.file<string>({ demand: true, describe: 'JSON config file (docs/runtime.md)' }),
  port: opt.port({ default: 0, describe: 'WebSocket port (0: a free one)' }),
  host: opt.string({ default: '127.0.0.1', describe: 'address the WebSocket port listens on (0.0.0.0: every interface, as in a pod)' }),
  httpPort: opt.port({
    default: 0,
    describe: 'plain-HTTP port of /metrics, /healthz and /readyz (0: a free one, printed in the ready line)',
  }),
  httpHost: opt.string({ default: '127.0.0.1', describe: 'address the HTTP port listens on (0.0.0.0: every interface)' }),
  db: opt.outFile({
    default: 'kais-orchestrator.db',
    sqlite: 'kais orchestrator store',
    describe: 'SQLite state file (created if missing, resumed if present)',
  }),
};

/** A store that cannot be opened is the user's file, not our bug: one line naming --db. */
function isStoreError(e: unknown): e is Error {
  return e instanceof Error && /^SQLITE_/.test(String((e as NodeJS.ErrnoException).code ?? ''));
}

export const orchestratorCommand: CommandModule<object, object> = {
  command: 'orchestrator',
  describe: 'run the orchestrator (ws hub, model registry, placement loop, SQLite store)',
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example('$0 orchestrator --config orchestrator.json --port 7000', 'the central service on port 7000'),
      ORCHESTRATOR_SPEC,
    ),
  handler: namingFlags(ORCHESTRATOR_SPEC, async (argv) => {
    const a = resolveOptions(ORCHESTRATOR_SPEC, argv);
    const cfg = readConfig(a.config);
    await checkHost('host', a.host);
    await checkHost('http-host', a.httpHost);
    await checkPortFree('port', a.port);
    await checkPortFree('http-port', a.httpPort);
    const log = lineLogger(processLogger('orchestrator')); // JSON lines on stderr (shared/log.ts)
    const o = await startOrchestrator(cfg, {
      port: a.port,
      host: a.host,
      dbPath: a.db,
      log,
      httpPort: a.httpPort,
      httpHost: a.httpHost,
    }).catch((e: NodeJS.ErrnoException) => {
      // a listen error carries the port it failed on
      const onHttp = (e as NodeJS.ErrnoException & { port?: number }).port === a.httpPort && a.httpPort !== a.port;
      const busy = onHttp ? listenProblem(e, 'http-port', a.httpPort) : listenProblem(e, 'port', a.port);
      if (busy) throw busy;
      // a config field found wrong at start (the GPG model, the Kubernetes cluster): name the file too
      if (e instanceof UsageError && e.message.startsWith('field "')) throw new UsageError(`${a.config}: ${e.message}`);
      if (isStoreError(e)) throw new UsageError(`--db ${a.db}: cannot use it as the orchestrator's store (${e.message.split('\n')[0]})`);
      throw e;
    });
    process.stdout.write(
      `${JSON.stringify({
        ready: true,
        port: o.port,
        url: o.hub.url,
        httpPort: o.httpPort,
        weightVersion: o.registry.weightVersion,
        placementVersion: o.registry.placementVersion,
        resumed: o.resumed,
      })}\n`,
    );
    await untilStopSignal();
    await o.close();
    process.exit(0);
  }),
};
