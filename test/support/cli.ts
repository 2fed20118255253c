/**
 * The `kais` command as a child process (the built dist/kais.js), and the convention every
 * bad-input case checks: exit code 2, one line on stderr naming the problem, nothing written.
 */
import { spawn, spawnSync } from 'node:child_process';
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

/**
 * Runs a research script, `dist/scripts/<name>.js`, to the end (at most `timeoutMs`) with `env` over
 * this process's environment, from the repository root (the scripts' settings are environment
 * variables, docs in each script's header).
 */
export function runScript(name: string, env: Record<string, string>, timeoutMs = 120_000): KaisRun {
  const root = path.join(__dirname, '..', '..');
  const r = spawnSync(process.execPath, [path.join(root, 'dist', 'scripts', `${name}.js`)], {
    cwd: root,
    encoding: 'utf8',
    timeout: timeoutMs,
    env: { ...process.env, ...env },
  });
  return { code: r.status, stdout: r.stdout, stderr: r.stderr };
}

/** Exit 2 with one line matching `problem`; `notWritten`, when given, must not exist afterwards. */
export function expectUsageExit(r: KaisRun, problem: RegExp, notWritten?: string): void {
  expect(r.code).toBe(2);
  expect(r.stderr.trim().split('\n')).toHaveLength(1);
  expect(r.stderr).toMatch(problem);
  if (notWritten !== undefined) expect(fs.existsSync(notWritten)).toBe(false);
}

/** Starts `kais ...args` and kills it (SIGKILL, as a crash) as soon as its stderr matches `when`; resolves once it has exited. */
export function killKaisWhen(args: string[], when: RegExp): Promise<void> {
  return new Promise<void>((resolve) => {
    const child = spawn(process.execPath, [KAIS, ...args]);
    let err = '';
    child.stderr.on('data', (d: Buffer) => {
      err += d.toString();
      if (when.test(err)) child.kill('SIGKILL');
    });
    child.on('exit', () => resolve());
  });
}
