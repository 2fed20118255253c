#!/usr/bin/env node
/**
 * The `kais` command. It only registers the yargs commands that each folder exports; the commands
 * themselves live next to the code they drive (training/jobs/*, agent/cli.ts, orchestrator/cli.ts).
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import { isUsageError } from './shared/errors';
import { evalCommand } from './training/jobs/eval';
import { detectCommand } from './training/jobs/detect';
import { trainCommand } from './training/jobs/train';
import { agentCommand } from './agent/cli';
import { nodeCommand } from './orchestrator/node-cli';
import { orchestratorCommand } from './orchestrator/cli';
import { upCommand } from './training/jobs/up';

/** Exit 2 with one line for the user's mistakes; a stack trace only for our own bugs. */
export function failAndExit(e: unknown): never {
  if (isUsageError(e)) {
    process.stderr.write(`kais: ${e.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`kais: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  await yargs(hideBin(process.argv))
    .scriptName('kais')
    .command(evalCommand)
    .command(trainCommand)
    .command(detectCommand)
    .command(agentCommand)
    .command(nodeCommand)
    .command(orchestratorCommand)
    .command(upCommand)
    .demandCommand(1, 'kais: name a command (see --help)')
    .strict()
    .fail((msg, err) => {
      if (err) failAndExit(err);
      process.stderr.write(`kais: ${msg}\n`);
      process.exit(2);
    })
    .help()
    .parseAsync();
}

main().catch(failAndExit);
