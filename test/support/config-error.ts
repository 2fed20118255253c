/**
 * Writes a config object to `file` and expects `readConfig` to refuse it with a one-line
 * UsageError matching `problem` (the convention of every config field's bad-input test).
 */
import * as fs from 'node:fs';
import { readConfig } from '../../orchestrator/main';
import { UsageError } from '../../shared/errors';

export function expectConfigError(file: string, config: unknown, problem: RegExp): void {
  fs.writeFileSync(file, JSON.stringify(config));
  let err: unknown = null;
  try {
    readConfig(file);
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(UsageError);
  expect((err as Error).message).toMatch(problem);
  expect((err as Error).message.split('\n')).toHaveLength(1);
}
