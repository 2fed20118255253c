/**
 * Errors with stable codes. A `UsageError` is the user's fault (bad flag, bad file): entry points
 * print its one-line message and exit with code 2, never a stack trace.
 */

export class KaisError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = 'KaisError';
  }
}

/** Bad command-line input or input file. `message` is the one line the user sees. */
export class UsageError extends KaisError {
  constructor(message: string, code = 'KAIS_ERR_USAGE') {
    super(code, message);
    this.name = 'UsageError';
  }
}

export function isUsageError(e: unknown): e is UsageError {
  return e instanceof UsageError;
}

export function errorToJSON(e: unknown): { name: string; code?: string; message: string } {
  if (e instanceof KaisError) return { name: e.name, code: e.code, message: e.message };
  if (e instanceof Error) return { name: e.name, message: e.message };
  return { name: 'Error', message: String(e) };
}

/**
 * Runs `f`, and a UsageError it throws names `flag` instead of the flag or setting its message
 * starts with: a checker shared by several flags (a trace, a policy name) speaks of the one the user
 * gave (`--eval-trace`, `--teacher`, TRACE), not of the flag it was first written for.
 */
export function asFlag<T>(flag: string, f: () => T): T {
  try {
    return f();
  } catch (e) {
    if (e instanceof UsageError) throw new UsageError(e.message.replace(/^(--[a-z][a-z0-9-]*|[A-Z][A-Z0-9_]*):/, `${flag}:`), e.code);
    throw e;
  }
}
