/**
 * The one logger of every kais process (issue 18 item 6): pino, JSON lines on stderr (stdout keeps
 * the ready line and command output), written synchronously so a line is out before an exit.
 *
 *   {"level":"warn","time":"2026-12-02T03:01:02.345Z","pid":123,"name":"orchestrator","msg":"event denied eAP 2: ..."}
 *
 * `name` is the process (orchestrator, agent, node); an agent's lines carry its `eap`. The level is
 * `KAIS_LOG_LEVEL` (trace, debug, info, warn, error; default info). The modules take a plain
 * `log(line)` function; `lineLogger` gives each line its level from what it says (errors, then
 * failures, refusals and losses as warnings, else info). Tokens are never logged: the modules do
 * not put them in lines, fields named token/authorization are redacted, and a `Bearer <x>` or
 * `token=<x>` that reaches a line anyway is masked.
 *
 * `kais up` turns its children's JSON lines back into text (`humanLine`) for its live view.
 */
import pino from 'pino';

export type Logger = pino.Logger;

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'];

/** The process's logger, writing JSON lines to stderr. */
export function processLogger(name: string, bindings: Record<string, unknown> = {}): Logger {
  const level = process.env.KAIS_LOG_LEVEL && LEVELS.includes(process.env.KAIS_LOG_LEVEL) ? process.env.KAIS_LOG_LEVEL : 'info';
  return pino(
    {
      name,
      level,
      base: { pid: process.pid, ...bindings },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: {
        paths: ['token', 'adminToken', 'executorToken', 'authorization', '*.token', '*.adminToken', '*.authorization', 'agentTokens'],
        censor: '[redacted]',
      },
    },
    pino.destination({ fd: 2, sync: true }),
  );
}

/** The level a plain log line deserves. */
export function levelOf(line: string): 'error' | 'warn' | 'info' {
  if (/^error\b|\berror:/i.test(line)) return 'error';
  if (/fail|refus|could not|cannot|unreadable|denied|quarantin|link down|ignored|not sent|not written|dropped|lost|exited/i.test(line))
    return 'warn';
  return 'info';
}

/** Masks a bearer or `token=` value that reached a line. */
export function maskSecrets(line: string): string {
  return line.replace(/(bearer\s+)[^\s"']+/gi, '$1[redacted]').replace(/(token[=:]\s*)[^\s"',;&]+/gi, '$1[redacted]');
}

/** A `log(line)` function over a logger: one JSON line per call, its level from levelOf. */
export function lineLogger(logger: Logger): (line: string) => void {
  return (line: string) => logger[levelOf(line)](maskSecrets(line));
}

/** A JSON log line as text (`warn: <msg>`, info without a prefix); other lines as they are. */
export function humanLine(line: string): string {
  if (!line.startsWith('{')) return line;
  try {
    const o = JSON.parse(line) as { level?: unknown; msg?: unknown };
    if (typeof o.msg !== 'string') return line;
    return o.level === 'info' || o.level === undefined ? o.msg : `${String(o.level)}: ${o.msg}`;
  } catch {
    return line;
  }
}
