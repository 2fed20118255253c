/**
 * A synthetic Alibaba batch_task CSV (v2017 layout) for tests that replay a trace without the real
 * data: 400 tasks of 40 jobs, one task per trace second.
 */
import * as fs from 'node:fs';

export function writeSyntheticTrace(file: string): string {
  const rows = Array.from(
    { length: 400 },
    (_, i) => `${i},${i + 20 + (i % 7) * 10},j${i % 40},t${i},1,Terminated,${50 + (i % 3) * 50},0.01`,
  );
  fs.writeFileSync(file, `${rows.join('\n')}\n`);
  return file;
}
