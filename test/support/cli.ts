/**
 * The `kais` command as a child process (the built dist/kais.js), and the convention every
 * bad-input case checks: exit code 2, one line on stderr naming the problem, nothing written.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

export const KAIS = path.join(__dirname, '..', '..', 'dist', 'kais.js');

export interface KaisRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs `kais ...args` to the end (at most `timeoutMs`). */
export function runKais(args: string[], timeoutMs = 60_000): KaisRun {
  const r = spawnSync(process.execPath, [KAIS, ...args], { encoding: 'utf8', timeout: timeoutMs });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Exit 2 with one line matching `problem`; `notWritten`, when given, must not exist afterwards. */
export function expectUsageExit(r: KaisRun, problem: RegExp, notWritten?: string): void {
  expect(r.code).toBe(2);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(problem);
  if (notWritten !== undefined) expect(fs.existsSync(notWritten)).toBe(false);
}
