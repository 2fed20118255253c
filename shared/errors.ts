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
