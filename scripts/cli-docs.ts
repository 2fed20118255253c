/**
 * Writes docs/cli.md, the option reference of every `kais` command, from the option specs the
 * commands run with (shared/config.ts). `npm run docs:cli` regenerates it;
 * test/unit/shared/config.test.ts fails when the file and the specs disagree.
 */
import * as fs from 'fs';
import * as path from 'path';
import { optionDocs } from '../shared/config';
import { TRAIN_CLI_SPEC } from '../training/jobs/train-options';
import { EVAL_SPEC } from '../training/jobs/eval';
import { DETECT_SPEC } from '../training/jobs/detect';
import { EXPORT_SPEC } from '../training/jobs/export';
import { UP_SPEC } from '../launcher/up';
import { AGENT_SPEC, AGENT_TOKEN_ENV } from '../agent/cli';
import { ORCHESTRATOR_SPEC } from '../orchestrator/cli';
import { NODE_ADMIN_TOKEN_ENV, NODE_SPEC } from '../orchestrator/node-cli';
import { ADMIN_TOKEN_ENV, NODES_SPEC, SCALE_SPEC, STATUS_SPEC, WEIGHTS_SPEC } from '../orchestrator/admin-cli';

/** The text of docs/cli.md. */
export function cliReference(): string {
  return [
    '# kais command-line reference',
    '',
    '<!-- Generated from the option specs by `npm run docs:cli` (scripts/cli-docs.ts); do not edit by hand. -->',
    '',
    'Rules every command follows:',
    '',
    '- **A flag given twice: the last one wins** (`kais eval --frames 3 --frames 5` runs 5 frames), so a wrapper',
    '  script can put its defaults first and let its caller override them.',
    '- Every flag is checked before any work starts: numbers must be finite and in their range (an integer where',
    '  the table says so), files must exist and be regular files, folders folders, output files must land in an',
    '  existing writable folder, URLs must parse. Input files are checked the same way when they are read',
    '  (scenario, curriculum, config and targets JSON, checkpoints, traces: a file that is not a trace is',
    '  refused after reading its first 64 KB).',
    '- A mistake of the user (a bad flag or file) prints **one line** on stderr naming the flag or file and the',
    '  problem, and exits with code **2**. Exit code 1 with "internal error" is a bug of ours: please report it.',
    `- Tokens are not taken only on the command line (\`ps\` shows it to every user): \`kais agent --token-file\``,
    `  or \`$${AGENT_TOKEN_ENV}\`; \`kais node --admin-token-file\` or \`$${NODE_ADMIN_TOKEN_ENV}\` (without either,`,
    '  `kais node` makes a token and prints it once, as `adminToken` in its ready line); `kais status`, `kais scale`,',
    `  \`kais nodes\` and \`kais weights\` read the orchestrator's admin token from \`--admin-token-file\` or \`$${ADMIN_TOKEN_ENV}\`.`,
    '- Booleans: `--flag` or `--no-flag`.',
    '',
    '## Options',
    '',
    optionDocs('train', TRAIN_CLI_SPEC),
    optionDocs('eval', EVAL_SPEC),
    optionDocs('detect', DETECT_SPEC),
    optionDocs('export', EXPORT_SPEC),
    optionDocs('up', UP_SPEC),
    optionDocs('agent', AGENT_SPEC),
    optionDocs('orchestrator', ORCHESTRATOR_SPEC),
    optionDocs('node', NODE_SPEC),
    optionDocs('status', STATUS_SPEC),
    optionDocs('scale', SCALE_SPEC),
    optionDocs('nodes', NODES_SPEC),
    optionDocs('weights', WEIGHTS_SPEC),
  ].join('\n');
}

if (require.main === module) {
  // run from the package root (npm run docs:cli)
  const file = path.resolve('docs', 'cli.md');
  fs.writeFileSync(file, cliReference());
  process.stdout.write(`wrote ${path.relative(process.cwd(), file)}\n`);
}
