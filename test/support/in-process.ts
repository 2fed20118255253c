/**
 * `kais <args>` in this process: the same yargs pipeline and handlers as the built CLI, without a
 * child process. The first process.exit ends the run as it would end the process (it throws here;
 * what happens after it is not output); a run that returns without one exits 0.
 */
import { runCli } from '../../kais';

class Exit extends Error {
  constructor(readonly code: number) {
    super(`process.exit(${code})`);
  }
}

export async function runInProcess(args: string[]): Promise<{ code: number | null; signal: null; stderr: string; stdout: string }> {
  let stderr = '';
  let stdout = '';
  // a command that fails without throwing sets process.exitCode (as the bin would exit with it)
  const exitCodeBefore = process.exitCode;
  process.exitCode = undefined;
  let exitCode: number | null = null;
  const exit = jest.spyOn(process, 'exit').mockImplementation(((code?: number) => {
    exitCode ??= code ?? 0;
    throw new Exit(code ?? 0);
  }) as never);
  const err = jest.spyOn(process.stderr, 'write').mockImplementation(((chunk: string | Uint8Array) => {
    if (exitCode === null) stderr += String(chunk);
    return true;
  }) as never);
  const out = jest.spyOn(process.stdout, 'write').mockImplementation(((chunk: string | Uint8Array) => {
    if (exitCode === null) stdout += String(chunk);
    return true;
  }) as never);
  try {
    await runCli(args);
    exitCode ??= typeof process.exitCode === 'number' ? process.exitCode : 0;
  } catch (e) {
    if (exitCode === null) stderr += `threw: ${e instanceof Error ? e.stack : String(e)}`;
  } finally {
    process.exitCode = exitCodeBefore;
    exit.mockRestore();
    err.mockRestore();
    out.mockRestore();
  }
  return { code: exitCode, signal: null, stderr, stdout };
}
