/**
 * `kais orchestrator --config <file> [--port N] [--db <file>]`: the central service (see main.ts).
 * Prints one JSON line on stdout once listening (`{"ready":true,"port":..,"url":"ws://..",
 * "weightVersion":..,"placementVersion":..,"resumed":..}`), logs to stderr, exits 0 on
 * SIGTERM/SIGINT after closing every session and the store.
 */
import type { ArgumentsCamelCase, Argv, CommandModule } from 'yargs';
import { exitWithParent } from '../lifecycle';
import { UsageError } from '../shared/errors';
import { readConfig, startOrchestrator } from './main';

interface OrchestratorArgs {
  config: string;
  port: number;
  db: string;
}

export const orchestratorCommand: CommandModule<object, OrchestratorArgs> = {
  command: 'orchestrator',
  describe: 'run the orchestrator (ws hub, model registry, placement loop, SQLite store)',
  builder: (y: Argv) =>
    y
      .option('config', { type: 'string', demandOption: true, describe: 'JSON config file (docs/runtime.md)' })
      .option('port', { type: 'number', default: 0, describe: 'WebSocket port (0: a free one)' })
      .option('db', { type: 'string', default: 'kais-orchestrator.db', describe: 'SQLite state file (created if missing, resumed if present)' }) as unknown as Argv<OrchestratorArgs>,
  handler: async (a: ArgumentsCamelCase<OrchestratorArgs>) => {
    if (!Number.isInteger(a.port) || a.port < 0 || a.port > 65535) throw new UsageError(`--port: must be an integer in 0..65535, got ${a.port}`);
    const cfg = readConfig(a.config);
    const log = (line: string) => process.stderr.write(`kais orchestrator: ${line}\n`);
    const o = await startOrchestrator(cfg, { port: a.port, dbPath: a.db, log }).catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'EADDRINUSE') throw new UsageError(`--port: ${a.port} is already in use`);
      throw e;
    });
    process.stdout.write(
      `${JSON.stringify({
        ready: true,
        port: o.port,
        url: o.hub.url,
        weightVersion: o.registry.weightVersion,
        placementVersion: o.registry.placementVersion,
        resumed: o.resumed,
      })}\n`,
    );
    await new Promise<void>((resolve) => {
      process.once('SIGTERM', () => resolve());
      process.once('SIGINT', () => resolve());
      exitWithParent(resolve);
    });
    await o.close();
    process.exit(0);
  },
};
