/**
 * Loader for Alibaba cluster-trace `batch_task` CSVs (no header). The only file that knows their
 * column order.
 *
 * Two layouts, told apart by the number of columns:
 *
 * | layout | columns | arrivalS   | endS     | jobId    | taskId    | instances    | status | planCpu  | planMem  |
 * | ------ | ------- | ---------- | -------- | -------- | --------- | ------------ | ------ | -------- | -------- |
 * | v2017  | 8       | 1 create   | 2 end    | 3 job_id | 4 task_id | 5 inst_num   | 6      | 7        | 8        |
 * | v2018  | 9       | 6 start    | 7 end    | 3 job    | 1 task    | 2 inst_num   | 5      | 8        | 9        |
 *
 * Quirks of the real files that are tolerated, not errors: empty plan_cpu / plan_mem (-> null),
 * end time 0 or empty (-> null: still running), negative create times (created before the trace
 * window; kept as they are), rows in any order (they are returned in file order; sort before
 * replaying), CRLF line endings, blank lines. In v2018 the task name is unique only within its job.
 *
 * A row is malformed when it has the wrong number of columns, a non-numeric arrival time, or a
 * non-empty numeric field that is not a number. A field of spaces only is not empty but malformed
 * (`Number(" ")` is 0: a blank create time read as 0 would stretch the replayed window). Malformed rows under 1% of all rows are skipped and
 * reported in one summary line through `warn`; 1% or more is a UsageError naming the file and the
 * first bad line.
 */
import * as fs from 'fs';
import * as path from 'path';
import { UsageError } from '../../shared/errors';

export type TraceLayout = 'v2017' | 'v2018';

/** One batch task. Times in trace seconds (relative to the trace start, may be negative). */
export interface TraceRow {
  /** v2017 create_time, v2018 start_time. */
  arrivalS: number;
  /** End time, or null when the trace has 0 / nothing (task still running). */
  endS: number | null;
  jobId: string;
  /** Unique in v2017; unique only within its job in v2018. */
  taskId: string;
  instances: number;
  /** Terminated, Waiting, Running, Failed, ... as written in the trace. */
  status: string;
  /** CPU per instance, 100 = one core; null when empty. */
  planCpu: number | null;
  /** Normalised memory per instance; null when empty. */
  planMem: number | null;
}

export interface LoadedTrace {
  /** The CSV file actually read (a folder argument resolved to its batch_task file). */
  file: string;
  layout: TraceLayout;
  /** Rows kept, in file order. */
  rows: TraceRow[];
  /** Malformed rows skipped. */
  skipped: number;
}

/** Share of malformed rows at or above which the file is rejected. */
export const MAX_MALFORMED_SHARE = 0.01;

interface Columns {
  count: number;
  arrival: number;
  end: number;
  job: number;
  task: number;
  instances: number;
  status: number;
  cpu: number;
  mem: number;
}

const LAYOUTS: Record<TraceLayout, Columns> = {
  v2017: { count: 8, arrival: 0, end: 1, job: 2, task: 3, instances: 4, status: 5, cpu: 6, mem: 7 },
  v2018: { count: 9, arrival: 5, end: 6, job: 2, task: 0, instances: 1, status: 4, cpu: 7, mem: 8 },
};

/**
 * Resolves `--trace <path>`: a CSV file, or a folder holding `batch_task.csv` (or, failing that,
 * exactly one `*batch_task.csv`, e.g. the development folder's `v2017_batch_task.csv`).
 */
export function resolveTracePath(tracePath: string): string {
  let st: fs.Stats;
  try {
    st = fs.statSync(tracePath);
  } catch (e) {
    throw new UsageError(`--trace: cannot read ${tracePath}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (!st.isDirectory()) return tracePath;
  const direct = path.join(tracePath, 'batch_task.csv');
  if (fs.existsSync(direct)) return direct;
  let names: string[];
  try {
    names = fs
      .readdirSync(tracePath)
      .filter((n) => n.endsWith('batch_task.csv'))
      .sort();
  } catch (e) {
    throw new UsageError(`--trace: cannot read folder ${tracePath}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  if (names.length === 1) return path.join(tracePath, names[0]);
  if (names.length === 0) throw new UsageError(`--trace: folder ${tracePath} holds no batch_task.csv`);
  throw new UsageError(`--trace: folder ${tracePath} holds several batch_task files (${names.join(', ')}); name one`);
}

/** Number, null for an empty field, NaN for garbage (a field of spaces only included). */
function numOrNull(s: string): number | null {
  if (s.length === 0) return null;
  // Number() reads "", " " and "\t" as 0: a blank field is not a time or a size
  if (s.trim().length === 0) return NaN;
  const v = Number(s);
  return Number.isFinite(v) ? v : NaN;
}

/**
 * Reads a batch_task CSV (file or folder, see resolveTracePath). `warn` receives at most one
 * summary line about skipped rows.
 */
export function loadTrace(tracePath: string, warn: (line: string) => void = () => {}): LoadedTrace {
  const file = resolveTracePath(tracePath);
  sniffTrace(file);
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`--trace: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  return parseTrace(text, file, warn);
}

/** A trace is read whole into one string; V8 strings stop near 512 MiB. */
export const MAX_TRACE_BYTES = 512 * 1024 * 1024;
/** How much of a file is read to tell whether it is a batch_task CSV at all. */
const SNIFF_BYTES = 64 * 1024;

/**
 * Refuses what is not a batch_task CSV after a bounded read, before the whole file is read: a
 * device or pipe (/dev/zero never ends), a file too big to hold, binary data, or a first 64 KB
 * without one row of 8 or 9 columns.
 */
function sniffTrace(file: string): void {
  let fd: number | null = null;
  try {
    const st = fs.statSync(file);
    if (!st.isFile()) throw new UsageError(`--trace: ${file} is not a regular file`);
    if (st.size > MAX_TRACE_BYTES)
      throw new UsageError(`--trace: ${file} holds ${st.size} bytes, more than ${MAX_TRACE_BYTES} (cut it to a time window)`);
    fd = fs.openSync(file, 'r');
    const buf = Buffer.alloc(Math.min(SNIFF_BYTES, st.size));
    const n = fs.readSync(fd, buf, 0, buf.length, 0);
    const head = buf.subarray(0, n);
    if (head.includes(0)) throw new UsageError(`--trace: ${file} holds binary data, not a batch_task CSV`);
    // the last line of the sample may be cut: leave it out unless the sample is the whole file
    const lines = head.toString('utf8').split('\n');
    if (n < st.size && lines.length > 1) lines.pop();
    detectLayout(lines, file);
  } catch (e) {
    if (e instanceof UsageError) throw e;
    throw new UsageError(`--trace: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
}

/** Parses CSV text; `file` is used in messages only. */
export function parseTrace(text: string, file: string, warn: (line: string) => void = () => {}): LoadedTrace {
  const lines = text.split('\n');
  const layout = detectLayout(lines, file);
  const c = LAYOUTS[layout];
  const rows: TraceRow[] = [];
  let total = 0;
  let skipped = 0;
  let headerNote: string | null = null;
  let firstBadLine = 0;
  let firstBadWhy = '';
  const bad = (lineNo: number, why: string): void => {
    skipped++;
    if (firstBadLine === 0) {
      firstBadLine = lineNo;
      firstBadWhy = why;
    }
  };

  for (let i = 0; i < lines.length; i++) {
    let line = lines[i];
    if (line.length > 0 && line.charCodeAt(line.length - 1) === 13) line = line.slice(0, -1);
    if (line.length === 0 || line.trim().length === 0) continue;
    total++;
    const f = line.split(',');
    if (f.length !== c.count) {
      bad(i + 1, `${f.length} columns, expected ${c.count}`);
      continue;
    }
    const arrival = numOrNull(f[c.arrival]);
    if (arrival === null || Number.isNaN(arrival)) {
      // a first row of names (a header some tools add, e.g. create_timestamp) is no malformed row:
      // in a short file it alone passed the malformed share and refused the file
      if (total === 1 && /^[A-Za-z_][\w ]*$/.test(f[c.arrival].trim())) {
        total--;
        // said once there are rows: a file of a header alone is one line (empty), not two
        headerNote = `kais: ${file}: line ${i + 1} read as a header (its time field is "${f[c.arrival].trim()}")`;
        continue;
      }
      bad(i + 1, `time "${f[c.arrival]}" is not a number`);
      continue;
    }
    const end = numOrNull(f[c.end]);
    const instances = numOrNull(f[c.instances]);
    const cpu = numOrNull(f[c.cpu]);
    const mem = numOrNull(f[c.mem]);
    if (Number.isNaN(end) || Number.isNaN(instances) || Number.isNaN(cpu) || Number.isNaN(mem)) {
      bad(i + 1, 'a numeric field is not a number');
      continue;
    }
    rows.push({
      arrivalS: arrival,
      endS: end === null || end === 0 ? null : end,
      jobId: f[c.job],
      taskId: f[c.task],
      instances: instances === null ? 1 : instances,
      status: f[c.status],
      planCpu: cpu,
      planMem: mem,
    });
  }

  if (total === 0) throw new UsageError(`--trace: ${file} is empty (no rows${headerNote ? ' after its header' : ''})`);
  if (headerNote) warn(headerNote);
  if (skipped > 0) {
    if (skipped >= MAX_MALFORMED_SHARE * total) {
      throw new UsageError(
        `--trace: ${file}: ${skipped} of ${total} rows are malformed (first at line ${firstBadLine}: ${firstBadWhy}); ` +
          `not a ${layout} batch_task file?`,
      );
    }
    warn(`kais: ${file}: skipped ${skipped} malformed rows of ${total} (first at line ${firstBadLine}: ${firstBadWhy})`);
  }
  return { file, layout, rows, skipped };
}

/** The layout is the most common column count (8 or 9) among the first 200 non-blank lines. */
function detectLayout(lines: string[], file: string): TraceLayout {
  let n8 = 0;
  let n9 = 0;
  let seen = 0;
  let firstCount = -1;
  let firstLine = 0;
  for (let i = 0; i < lines.length && seen < 200; i++) {
    const line = lines[i];
    if (line.trim().length === 0) continue;
    seen++;
    let count = 1;
    for (let k = 0; k < line.length; k++) if (line.charCodeAt(k) === 44) count++;
    if (firstCount < 0) {
      firstCount = count;
      firstLine = i + 1;
    }
    if (count === 8) n8++;
    else if (count === 9) n9++;
  }
  if (seen === 0) throw new UsageError(`--trace: ${file} is empty (no rows)`);
  if (n8 === 0 && n9 === 0) {
    throw new UsageError(
      `--trace: ${file}: line ${firstLine} has ${firstCount} columns; expected 8 (v2017 batch_task) or 9 (v2018 batch_task)`,
    );
  }
  return n9 > n8 ? 'v2018' : 'v2017';
}
