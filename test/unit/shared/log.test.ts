/**
 * shared/log.ts in a real process: JSON lines with levels on stderr (never stdout), tokens masked,
 * and `kais up`'s view of them as text.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { humanLine, levelOf, maskSecrets } from '../../../shared/log';

const LOG = path.resolve(__dirname, '..', '..', '..', 'dist', 'shared', 'log.js');

describe('shared/log', () => {
  it('writes one JSON line per call on stderr, with the level, the process name, its bindings and no token', () => {
    const script = `
      const { lineLogger, processLogger } = require(${JSON.stringify(LOG)});
      const log = lineLogger(processLogger('agent', { eap: 3 }));
      log('connected to ws://127.0.0.1:7000');
      log('orchestrator refused hello: bad token');
      log('error: store file deleted');
      log('sent Authorization: Bearer s3cr3t-value and token=abcdef123');
      processLogger('orchestrator').info({ token: 'tok-123456', adminToken: 'adm-123456', n: 1 }, 'fields');
      process.stdout.write('ready\\n');`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, KAIS_LOG_LEVEL: 'info' } });
    expect(r.status).toBe(0);
    expect(r.stdout).toBe('ready\n');
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(5);
    const o = lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(o.map((x) => x.level)).toEqual(['info', 'warn', 'error', 'info', 'info']);
    expect(o.slice(0, 4).every((x) => x.name === 'agent' && x.eap === 3 && typeof x.pid === 'number' && typeof x.time === 'string')).toBe(
      true,
    );
    expect(o[4].name).toBe('orchestrator');
    expect(o[4].n).toBe(1);
    for (const secret of ['s3cr3t-value', 'abcdef123', 'tok-123456', 'adm-123456']) expect(r.stderr).not.toContain(secret);
    expect(o[3].msg).toBe('sent Authorization: Bearer [redacted] and token=[redacted]');
    expect(humanLine(lines[0])).toBe('connected to ws://127.0.0.1:7000');
    expect(humanLine(lines[1])).toBe('warn: orchestrator refused hello: bad token');
  });

  it('KAIS_LOG_LEVEL=warn keeps only warnings and errors', () => {
    const script = `
      const { lineLogger, processLogger } = require(${JSON.stringify(LOG)});
      const log = lineLogger(processLogger('node'));
      log('up'); log('placement step failed: x');`;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', env: { ...process.env, KAIS_LOG_LEVEL: 'warn' } });
    const lines = r.stderr.trim().split('\n');
    expect(lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['placement step failed: x']);
  });

  it('levels, masks and text views of plain lines', () => {
    expect(levelOf('learner: update 3 -> weights v4')).toBe('info');
    expect(levelOf('store write failed (SQLITE_FULL)')).toBe('warn');
    expect(maskSecrets('no secret here')).toBe('no secret here');
    expect(humanLine('not json')).toBe('not json');
    expect(humanLine('{"level":"error","msg":"boom"}')).toBe('error: boom');
  });
});
