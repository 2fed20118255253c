#!/usr/bin/env node
/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-require-imports */
/**
 * The `kais` command. It only registers the yargs commands that each folder exports; the commands
 * themselves live next to the code they drive (training/jobs/*, agent/cli.ts, orchestrator/cli.ts, launcher/up.ts).
 */
import yargs from 'yargs';
import { hideBin } from 'yargs/helpers';
import type { CommandModule } from 'yargs';
import { isUsageError } from './shared/errors';
import { kebab, setCommandLine } from './shared/config';

/**
 * Each command's module, loaded only when that command runs: an agent process must not pay for
 * tfjs and the training code (measured: +0.5 s start-up and +25 MB RSS per agent when all loaded).
 */
const COMMANDS: Record<string, () => CommandModule<any, any>> = {
  eval: () => require('./training/jobs/eval').evalCommand,
  train: () => require('./training/jobs/train').trainCommand,
  detect: () => require('./training/jobs/detect').detectCommand,
  export: () => require('./training/jobs/export').exportCommand,
  agent: () => require('./agent/cli').agentCommand,
  node: () => require('./orchestrator/node-cli').nodeCommand,
  orchestrator: () => require('./orchestrator/cli').orchestratorCommand,
  up: () => require('./launcher/up').upCommand,
  status: () => require('./orchestrator/admin-cli').statusCommand,
  scale: () => require('./orchestrator/admin-cli').scaleCommand,
  nodes: () => require('./orchestrator/admin-cli').nodesCommand,
  weights: () => require('./orchestrator/admin-cli').weightsCommand,
};

/** One line: the user sees one line per mistake, whatever wrote the message (yargs writes several). */
export function oneLine(msg: string): string {
  return msg.trim().replace(/\s*\n\s*/g, '; ');
}

/**
 * yargs names an unknown flag twice, as written and camel-cased ("Unknown arguments: bogus-flag,
 * bogusFlag"): each once, as the user wrote it (`--bogus-flag`).
 */
export function unknownOnce(msg: string): string {
  const m = /^Unknown arguments?: (.*)$/.exec(msg);
  if (!m) return msg;
  const names = m[1].split(', ');
  const given = new Set(names);
  const kept = names.filter((n) => !(/[A-Z]/.test(n) && given.has(kebab(n))));
  return `Unknown argument${kept.length > 1 ? 's' : ''}: ${kept.map((n) => (n.length === 1 ? `-${n}` : `--${n}`)).join(', ')}`;
}

/** Exit 2 with one line for the user's mistakes; a stack trace only for our own bugs. */
export function failAndExit(e: unknown): never {
  if (isUsageError(e)) {
    process.stderr.write(`kais: ${oneLine(e.message)}\n`);
    process.exit(2);
  }
  process.stderr.write(`kais: internal error: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
}

/** The named command alone when it is one of ours, else all of them (for --help and errors). */
function commandsFor(name: string | undefined): CommandModule<any, any>[] {
  if (name !== undefined && Object.prototype.hasOwnProperty.call(COMMANDS, name)) return [COMMANDS[name]()];
  return Object.values(COMMANDS).map((load) => load());
}

/**
 * `--flag -5,10` as `--flag=-5,10`: yargs reads a value that starts with a dash and is not a plain
 * number (`-Infinity`, `-5,10`, `-.5e3`) as short flags, so the user heard "Unknown arguments: I, n,
 * f, ..." and not which flag was wrong. kais has no short flags, so a dash followed by a digit, a
 * point or Infinity/NaN after a long flag is that flag's value (then checked by the flag's own rule).
 */
export function joinDashValues(args: readonly string[]): string[] {
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const a = args[i];
    if (a === '--') return [...out, ...args.slice(i)];
    const next = args[i + 1];
    if (/^--[^=]+$/.test(a) && next !== undefined && /^-(?:[\d.]|inf|nan)/i.test(next)) {
      out.push(`${a}=${next}`);
      i++;
    } else out.push(a);
  }
  return out;
}

/** Runs `kais <args>` (the bin, and tests that drive the commands in-process). */
export async function runCli(given: string[]): Promise<void> {
  const args = joinDashValues(given);
  setCommandLine(args);
  try {
    await parser(args).parseAsync();
  } catch (e) {
    failAndExit(e);
  }
}

function parser(args: string[]) {
  return (
    yargs(args)
      .scriptName('kais')
      // a flag given twice: the last one wins, in every command (docs/cli.md)
      .parserConfiguration({ 'duplicate-arguments-array': false })
      .command(commandsFor(args[0]))
      .demandCommand(1, 'name a command (see kais --help)')
      .strict()
      .fail((msg, err) => {
        if (err) failAndExit(err);
        process.stderr.write(`kais: ${oneLine(unknownOnce(msg ?? 'bad arguments'))}\n`);
        process.exit(2);
      })
      .epilogue(
        'A flag given twice: the last one wins. Bad flags or files: one line on stderr, exit code 2. Option reference: docs/cli.md.',
      )
      .help()
  );
}

/**
 * A standard output that cannot take what a command writes (`> /dev/full`, a full disk): one line
 * and exit 1, not an unhandled 'error' event's stack (or tfjs-wasm's exit 7). A reader that went
 * away (`| head`: EPIPE) has what it wanted: exit 0, quietly.
 */
export function onStdoutError(e: NodeJS.ErrnoException): never {
  if (e.code === 'EPIPE') process.exit(0);
  process.stderr.write(`kais: cannot write to standard output (${e.code ?? e.message})\n`);
  process.exit(1);
}

if (require.main === module) {
  process.stdout.on('error', onStdoutError);
  // a standard error that went away (`2>&1 | head`): what is left to say is lost, and the command
  // goes on to its end (kais up killed by the EPIPE left its folder of tokens in /tmp)
  process.stderr.on('error', () => undefined);
  void runCli(hideBin(process.argv));
}
