/**
 * Option specs: every command declares each of its options once (type, default, range, one-line
 * description), and this file makes the rest from that declaration (CleanRL's `Args`, BullMQ's
 * `@defaultValue`): the yargs options, the typed defaults, the validation that runs before any work
 * starts, and the option reference in docs/cli.md (test/unit/shared/config.test.ts keeps it in sync).
 *
 * Rules every command follows (docs/cli.md says them to users):
 * - a flag given twice: the last one wins (`kais eval --frames 3 --frames 5` runs 5 frames), as
 *   in most Unix tools, so a wrapper script can override its own defaults;
 * - numbers must be finite and in their range; files must exist and be files, folders folders,
 *   output files must land in an existing writable folder; URLs must parse;
 * - every user mistake is a `UsageError`: one line naming the flag and the problem, exit code 2.
 *
 * Nothing here knows a command: the specs live next to the commands (TRAIN_SPEC in
 * training/jobs/train-options.ts, EVAL_SPEC, DETECT_SPEC, UP_SPEC in their jobs, AGENT_SPEC in
 * agent/cli.ts, ORCHESTRATOR_SPEC and NODE_SPEC in orchestrator/). Nor anything of processes or
 * sockets (DESIGN.md section 3): the environment and port checks are in shared/lifecycle.ts (entry points only).
 */
import * as fs from 'fs';
import * as path from 'path';
import type { Argv, Options } from 'yargs';
import { UsageError } from './errors';

/** One declared option; `T` is its type once parsed and checked. */
export interface Opt<T> {
  /** What the value is, for the docs ("integer >= 1", "file", "one of a, b"). */
  readonly kind: string;
  readonly describe: string;
  /** The documented default, applied by resolveOptions (undefined: no default). */
  readonly default?: T;
  /** Text shown for the default when it is not a plain value (e.g. "the scenario's"). */
  readonly defaultText?: string;
  /** The flag's name when it is not the kebab-case of the key. */
  readonly flag?: string;
  /** The flag must be given. */
  readonly demand?: boolean;
  /** Not listed in --help and the docs (kept for scripts that still pass it). */
  readonly hidden?: boolean;
  /** How yargs reads the raw text; numbers are read as strings and parsed here (better messages). */
  readonly yargsType: 'string' | 'boolean';
  /** Raw yargs value -> T, or a problem (a string) for the user. */
  readonly parse: (raw: unknown) => T | Problem;
}

/** A problem with a value, said in a few words after "--flag: ". */
export class Problem {
  constructor(readonly why: string) {}
}

type Spec = Record<string, Opt<unknown>>;

/** The options a spec declares (an option without a default may be undefined: its T says so). */
export type OptionsOf<S extends Spec> = {
  [K in keyof S]: S[K] extends Opt<infer T> ? T : never;
};

// ---------------------------------------------------------------------------------- VALUES

const show = (v: unknown): string => (typeof v === 'string' ? JSON.stringify(v) : String(v));

function asText(raw: unknown): string | Problem {
  if (typeof raw === 'number' || typeof raw === 'string') return String(raw);
  return new Problem(`expected a value, got ${show(raw)}`);
}

export interface NumberRange {
  min?: number;
  max?: number;
  /** the value must be above min (not equal) */
  minExclusive?: boolean;
  maxExclusive?: boolean;
  integer?: boolean;
  /** Infinity is accepted (e.g. "off") */
  allowInfinity?: boolean;
}

function rangeText(r: NumberRange): string {
  const what = r.integer ? 'an integer' : 'a number';
  const lo = r.min === undefined ? null : `${r.minExclusive ? '>' : '>='} ${r.min}`;
  const hi = r.max === undefined ? null : `${r.maxExclusive ? '<' : '<='} ${r.max}`;
  if (lo && hi) return `${what} ${lo} and ${hi}`;
  return [what, lo ?? hi].filter(Boolean).join(' ');
}

/** A number read from text: decimal or exponent notation, finite unless allowed, within range. */
export function parseNumber(raw: unknown, r: NumberRange): number | Problem {
  const text = typeof raw === 'number' ? null : asText(raw);
  if (text instanceof Problem) return text;
  const t = text === null ? '' : text.trim();
  const v =
    typeof raw === 'number'
      ? raw
      : /^[+-]?(\d+\.?\d*|\.\d+)(e[+-]?\d+)?$/i.test(t)
        ? Number(t)
        : /^[+-]?Infinity$/.test(t)
          ? Number(t)
          : NaN;
  const expected = rangeText(r);
  if (Number.isNaN(v)) return new Problem(`expected ${expected}, got ${show(raw)}`);
  if (!Number.isFinite(v) && !(r.allowInfinity && v === Infinity)) return new Problem(`expected ${expected} (finite), got ${show(raw)}`);
  if (r.integer && Number.isFinite(v) && !Number.isSafeInteger(v)) return new Problem(`expected ${expected}, got ${show(raw)}`);
  if (r.min !== undefined && (r.minExclusive ? !(v > r.min) : !(v >= r.min))) return new Problem(`expected ${expected}, got ${show(raw)}`);
  if (r.max !== undefined && (r.maxExclusive ? !(v < r.max) : !(v <= r.max))) return new Problem(`expected ${expected}, got ${show(raw)}`);
  return v;
}

interface Common<T> {
  describe: string;
  default?: T;
  defaultText?: string;
  flag?: string;
  demand?: boolean;
  hidden?: boolean;
}

/** A string that must not be empty (unless `empty`), optionally matching a pattern. */
function parseText(raw: unknown, o: { empty?: boolean; pattern?: RegExp; patternText?: string }): string | Problem {
  const t = asText(raw);
  if (t instanceof Problem) return t;
  if (!o.empty && t === '') return new Problem('expected a value, got nothing');
  if (o.pattern && !o.pattern.test(t)) return new Problem(`expected ${o.patternText ?? o.pattern.source}, got ${show(t)}`);
  return t;
}

/** Reads a path (non-empty text, no NUL byte). */
function parsePath(raw: unknown): string | Problem {
  const t = parseText(raw, {});
  if (t instanceof Problem) return t;
  if (t.includes('\0')) return new Problem('a path cannot hold a NUL byte');
  return t;
}

function statOf(p: string): fs.Stats | null {
  try {
    return fs.statSync(p);
  } catch {
    return null;
  }
}

function writableDir(dir: string): boolean {
  try {
    fs.accessSync(dir, fs.constants.W_OK | fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** An output file: the path is a regular file or absent, in an existing folder we can write. */
export function checkOutputFile(p: string): string | Problem {
  const st = statOf(p);
  if (st && !st.isFile()) return new Problem(`${p} exists and is not a regular file`);
  const dir = path.dirname(path.resolve(p));
  const dst = statOf(dir);
  if (!dst) return new Problem(`folder ${dir} does not exist`);
  if (!dst.isDirectory()) return new Problem(`${dir} is not a folder`);
  if (!writableDir(dir)) return new Problem(`folder ${dir} is not writable`);
  if (st) {
    try {
      fs.accessSync(p, fs.constants.W_OK);
    } catch {
      return new Problem(`${p} is not writable`);
    }
  }
  return p;
}

/**
 * An output folder: an existing writable folder, or a path the command can create (its nearest
 * existing ancestor is a writable folder; `mkdir -p` comes later).
 */
export function checkOutputDir(p: string): string | Problem {
  const st = statOf(p);
  if (st) {
    if (!st.isDirectory()) return new Problem(`${p} exists and is not a folder`);
    if (!writableDir(p)) return new Problem(`folder ${p} is not writable`);
    return p;
  }
  let ancestor = path.dirname(path.resolve(p));
  let ast = statOf(ancestor);
  while (!ast && path.dirname(ancestor) !== ancestor) {
    ancestor = path.dirname(ancestor);
    ast = statOf(ancestor);
  }
  if (!ast || !ast.isDirectory()) return new Problem(`${ancestor} is not a folder, so ${p} cannot be created`);
  if (!writableDir(ancestor)) return new Problem(`folder ${ancestor} is not writable, so ${p} cannot be created`);
  return p;
}

/** An input: a readable regular file (or, with `dir`, a folder). */
export function checkInput(p: string, o: { file?: boolean; dir?: boolean }): string | Problem {
  const st = statOf(p);
  if (!st) return new Problem(`${p} does not exist`);
  if (st.isDirectory()) {
    if (!o.dir) return new Problem(`${p} is a folder, expected a file`);
  } else if (st.isFile()) {
    if (!o.file) return new Problem(`${p} is a file, expected a folder`);
  } else {
    return new Problem(`${p} is not a regular ${o.file ? 'file' : 'folder'}`);
  }
  try {
    fs.accessSync(p, fs.constants.R_OK);
  } catch {
    return new Problem(`${p} is not readable`);
  }
  return p;
}

/** Largest JSON input read (scenario, lesson, validation set): the shipped ones are a few KB. */
export const MAX_JSON_BYTES = 16 * 1024 * 1024;

/**
 * Reads a small text input (a JSON scenario, lesson or validation file): a regular file of at most
 * `maxBytes`, so /dev/zero, a FIFO or a huge file is refused before it is read. Problems are a
 * UsageError starting with `what` (the flag, or the file that named this one).
 */
export function readInputFile(file: string, what: string, maxBytes = MAX_JSON_BYTES): string {
  const input = checkInput(file, { file: true });
  if (input instanceof Problem) throw new UsageError(`${what}: ${input.why}`);
  const st = statOf(file);
  if (st && st.size > maxBytes)
    throw new UsageError(`${what}: ${file} holds ${st.size} bytes, more than ${maxBytes} (not the file meant?)`);
  let bytes: Buffer;
  try {
    bytes = fs.readFileSync(file);
  } catch (e) {
    throw new UsageError(`${what}: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)})`);
  }
  return utf8Text(bytes, `${what}: ${file}`);
}

/**
 * A JSON input file's bytes as text: UTF-8 (a leading BOM dropped). UTF-16 (a UTF-16 BOM), NUL
 * bytes or bytes that are no UTF-8 are refused, naming where: they were read as text with NULs or
 * U+FFFD in it, which the JSON parser's message then echoed to the terminal.
 */
export function utf8Text(bytes: Buffer, where: string): string {
  if (bytes.length >= 2 && ((bytes[0] === 0xff && bytes[1] === 0xfe) || (bytes[0] === 0xfe && bytes[1] === 0xff)))
    throw new UsageError(`${where} is UTF-16 text: save it as UTF-8`);
  const nul = bytes.indexOf(0);
  if (nul >= 0) throw new UsageError(`${where} holds binary data (a NUL byte at offset ${nul}), not text`);
  const body = bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf ? bytes.subarray(3) : bytes;
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(body);
  } catch {
    throw new UsageError(`${where} is not UTF-8 text`);
  }
}

const SQLITE_HEADER = Buffer.from('SQLite format 3\0', 'latin1');

/**
 * The first 16 bytes of a file say whether it is a SQLite database (an empty file counts as new).
 * `what` names what the file should be, for the message ("kais checkpoint").
 */
export function checkSqliteFile(p: string, what?: string): string | Problem {
  const st = statOf(p);
  if (!st || st.size === 0) return p;
  if (!st.isFile()) return new Problem(`${p} is not a regular file`);
  const head = Buffer.alloc(16);
  let fd: number | null = null;
  try {
    fd = fs.openSync(p, 'r');
    fs.readSync(fd, head, 0, 16, 0);
  } catch (e) {
    return new Problem(`cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  } finally {
    if (fd !== null) fs.closeSync(fd);
  }
  if (!head.equals(SQLITE_HEADER)) return new Problem(`${p} is not a SQLite database${what ? `, so not a usable ${what}` : ''}`);
  return p;
}

/** Largest token file read (a token is a line; anything bigger is the wrong file). */
export const MAX_SECRET_BYTES = 4096;

/** A token from a file: a regular file of at most MAX_SECRET_BYTES, its first line, trimmed. */
export function readSecretFile(p: string): string | Problem {
  const input = checkInput(p, { file: true });
  if (input instanceof Problem) return input;
  const st = statOf(p);
  if (st && st.size > MAX_SECRET_BYTES) return new Problem(`${p} holds ${st.size} bytes, more than a token (${MAX_SECRET_BYTES} at most)`);
  let text: string;
  try {
    text = fs.readFileSync(p, 'utf8');
  } catch (e) {
    return new Problem(`cannot read ${p} (${(e as NodeJS.ErrnoException).code ?? 'error'})`);
  }
  const token = text.split(/\r?\n/)[0].trim();
  if (token === '') return new Problem(`${p} holds no token (its first line is empty)`);
  return token;
}

// ---------------------------------------------------------------------------- CONSTRUCTORS

function make<T>(kind: string, yargsType: 'string' | 'boolean', c: Common<T>, parse: (raw: unknown) => T | Problem): Opt<T> {
  return {
    kind,
    yargsType,
    parse,
    describe: c.describe,
    default: c.default,
    defaultText: c.defaultText,
    flag: c.flag,
    demand: c.demand,
    hidden: c.hidden,
  };
}

/** The option constructors; the type of each option follows from its constructor and default. */
export const opt = {
  number: (c: Common<number> & NumberRange): Opt<number> => make(rangeText(c), 'string', c, (raw) => parseNumber(raw, c)),
  integer: (c: Common<number> & Omit<NumberRange, 'integer'>): Opt<number> => opt.number({ ...c, integer: true }),
  /** A TCP port, 0 = any free one. */
  port: (c: Common<number>): Opt<number> => opt.number({ ...c, integer: true, min: 0, max: 65535 }),
  boolean: (c: Common<boolean>): Opt<boolean> =>
    make('boolean', 'boolean', c, (raw) => (typeof raw === 'boolean' ? raw : new Problem(`expected true or false, got ${show(raw)}`))),
  string: (c: Common<string> & { empty?: boolean; pattern?: RegExp; patternText?: string }): Opt<string> =>
    make(c.patternText ?? 'text', 'string', c, (raw) => parseText(raw, c)),
  /** A string that may be absent (undefined, or the default given, e.g. null). */
  optString: <D extends string | null | undefined = undefined>(
    c: Common<D> & { empty?: boolean; pattern?: RegExp; patternText?: string },
  ): Opt<string | D> => make<string | D>(c.patternText ?? 'text', 'string', c, (raw) => parseText(raw, c)),
  choice: <C extends string>(choices: readonly C[], c: Common<C>): Opt<C> =>
    make(`one of ${choices.join(', ')}`, 'string', c, (raw) => {
      const t = parseText(raw, {});
      if (t instanceof Problem) return t;
      return (choices as readonly string[]).includes(t) ? (t as C) : new Problem(`expected one of ${choices.join(', ')}, got ${show(t)}`);
    }),
  /** An existing readable file (with `dir`, a folder is accepted too; with `sqlite`, a SQLite file: true or what it holds). */
  file: <D extends string | null | undefined = undefined>(
    c: Common<D> & { dir?: boolean; ext?: RegExp; extText?: string; sqlite?: boolean | string },
  ): Opt<string | D> =>
    make<string | D>(c.sqlite ? 'SQLite file' : c.dir ? 'file or folder' : 'file', 'string', c, (raw) => {
      const p = parsePath(raw);
      if (p instanceof Problem) return p;
      if (c.ext && !c.ext.test(p)) return new Problem(`${p}: expected ${c.extText ?? c.ext.source}`);
      const input = checkInput(p, { file: true, dir: c.dir });
      return input instanceof Problem || !c.sqlite ? input : checkSqliteFile(p, typeof c.sqlite === 'string' ? c.sqlite : undefined);
    }),
  /** An existing readable folder. */
  dir: <D extends string | null | undefined = undefined>(c: Common<D>): Opt<string | D> =>
    make<string | D>('folder', 'string', c, (raw) => {
      const p = parsePath(raw);
      return p instanceof Problem ? p : checkInput(p, { dir: true });
    }),
  /** A file the command writes: absent or a regular file, in an existing writable folder. */
  outFile: <D extends string | null | undefined = undefined>(
    c: Common<D> & { ext?: RegExp; extText?: string; sqlite?: boolean | string },
  ): Opt<string | D> =>
    make<string | D>(c.sqlite ? 'SQLite file to write' : 'file to write', 'string', c, (raw) => {
      const p = parsePath(raw);
      if (p instanceof Problem) return p;
      if (c.ext && !c.ext.test(p)) return new Problem(`${p}: expected ${c.extText ?? c.ext.source}`);
      const out = checkOutputFile(p);
      return out instanceof Problem || !c.sqlite ? out : checkSqliteFile(p, typeof c.sqlite === 'string' ? c.sqlite : undefined);
    }),
  /** A folder the command writes into: an existing writable folder, or one it can create. */
  outDir: <D extends string | null | undefined = undefined>(c: Common<D>): Opt<string | D> =>
    make<string | D>('folder to write', 'string', c, (raw) => {
      const p = parsePath(raw);
      return p instanceof Problem ? p : checkOutputDir(p);
    }),
  /** A URL with one of the given protocols (e.g. ['ws:', 'wss:']). */
  url: (protocols: readonly string[], c: Common<string>): Opt<string> =>
    make(`${protocols.map((p) => `${p}//`).join(' or ')} URL`, 'string', c, (raw) => {
      const t = parseText(raw, {});
      if (t instanceof Problem) return t;
      let u: URL;
      try {
        u = new URL(t);
      } catch {
        return new Problem(`expected a ${protocols.map((p) => `${p}//`).join(' or ')} URL, got ${show(t)}`);
      }
      if (!protocols.includes(u.protocol))
        return new Problem(`expected a ${protocols.map((p) => `${p}//`).join(' or ')} URL, got ${show(t)}`);
      if (!u.hostname) return new Problem(`${show(t)} names no host`);
      return t;
    }),
  /** A file holding a token (the value is the token: its first line). */
  secretFile: (c: Common<string | undefined>): Opt<string | undefined> =>
    make<string | undefined>('file holding a token', 'string', c, (raw) => {
      const p = parsePath(raw);
      return p instanceof Problem ? p : readSecretFile(p);
    }),
  /** A value of its own syntax (a list, a window, JSON): `parse` says what it expects. */
  custom: <T>(kind: string, c: Common<T>, parse: (text: string) => T | Problem): Opt<T> =>
    make(kind, 'string', c, (raw) => {
      const t = parseText(raw, {});
      return t instanceof Problem ? t : parse(t);
    }),
};

// -------------------------------------------------------------------------------- USING A SPEC

export const kebab = (key: string): string => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
export const flagOf = (key: string, o: Opt<unknown>): string => o.flag ?? kebab(key);

function defaultShown(o: Opt<unknown>): string | undefined {
  if (o.defaultText !== undefined) return o.defaultText;
  if (o.default === undefined || o.default === null) return undefined;
  return Array.isArray(o.default) ? o.default.join(',') : String(o.default);
}

/**
 * Adds the spec's options to a yargs builder. Defaults are not given to yargs (they are applied by
 * resolveOptions, so a command can tell "not given" from "given the default"); --help shows them.
 */
export function yargsOptions<S extends Spec>(y: Argv, spec: S): Argv {
  for (const [key, o] of Object.entries(spec)) {
    const d = defaultShown(o);
    const opts: Options = {
      type: o.yargsType,
      describe: o.kind === 'boolean' || o.kind === 'text' ? o.describe : `${o.describe} [${o.kind}]`,
      hidden: o.hidden,
    };
    if (d !== undefined) opts.defaultDescription = d;
    if (o.demand) opts.demandOption = true;
    y = y.option(flagOf(key, o), opts);
  }
  return y;
}

/** The raw value yargs holds for a flag (a repeated flag: the last one, whatever the parser did). */
function rawOf(argv: Record<string, unknown>, key: string, o: Opt<unknown>): unknown {
  const flag = flagOf(key, o);
  let v = argv[flag] ?? argv[key];
  if (Array.isArray(v)) v = v[v.length - 1];
  return v;
}

/** The words of the command line being run (kais.ts runCli sets them): what yargs saw before it parsed. */
let commandLine: readonly string[] = [];
export function setCommandLine(args: readonly string[]): void {
  commandLine = args;
}

/**
 * The options the user gave, parsed and checked (absent ones left out). The first problem throws a
 * UsageError naming the flag: `--frames: expected an integer >= 1, got "1e308"`.
 */
export function givenOptions<S extends Spec>(spec: S, argv: Record<string, unknown>): Partial<OptionsOf<S>> {
  const out: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(spec)) {
    // yargs reads any --flag=<value> of a boolean but "true" as false (--json=yes printed the table,
    // --tls=yes ran plain ws://): the value the user wrote is checked here
    if (o.yargsType === 'boolean') {
      const flag = flagOf(key, o);
      for (const w of commandLine) {
        if (!w.startsWith(`--${flag}=`)) continue;
        const value = w.slice(flag.length + 3);
        if (value !== 'true' && value !== 'false') throw new UsageError(`--${flag}: expected true or false, got ${show(value)}`);
      }
    }
    const raw = rawOf(argv, key, o);
    if (raw === undefined) {
      if (o.demand) throw new UsageError(`--${flagOf(key, o)}: required`);
      continue;
    }
    const v = o.parse(raw);
    if (v instanceof Problem) throw new UsageError(`--${flagOf(key, o)}: ${v.why}`);
    out[key] = v;
  }
  return out as Partial<OptionsOf<S>>;
}

/** The spec's defaults (options without one are left out). */
export function defaultsOf<S extends Spec>(spec: S): Partial<OptionsOf<S>> {
  const out: Record<string, unknown> = {};
  for (const [key, o] of Object.entries(spec)) if (o.default !== undefined) out[key] = o.default;
  return out as Partial<OptionsOf<S>>;
}

/** The given options over the defaults. */
export function resolveOptions<S extends Spec>(spec: S, argv: Record<string, unknown>): OptionsOf<S> {
  return { ...defaultsOf(spec), ...givenOptions(spec, argv) } as OptionsOf<S>;
}

/**
 * Checks options that came in through code (a test, another job) against the spec: every value
 * present is re-read by its option's parser, so the same rules hold in-process as on the CLI.
 */
export function checkOptions<S extends Spec>(spec: S, values: Partial<Record<keyof S, unknown>>): void {
  for (const [key, o] of Object.entries(spec)) {
    const v = values[key as keyof S];
    if (v === undefined || v === null) continue;
    // as the command line would have given it: a list as "a,b", a number as its text
    const p = o.parse(Array.isArray(v) ? v.join(',') : typeof v === 'number' && !Number.isFinite(v) ? String(v) : v);
    if (p instanceof Problem) throw new UsageError(`--${flagOf(key, o)}: ${p.why}`);
  }
}

/**
 * The user's mistake named by its flag: a UsageError that starts with the value of one of the
 * command's path options (`runs/a.db: trained on scenario "tiny"`, `data/train: missing folder`)
 * gets that flag in front (`--checkpoint runs/a.db: ...`). Messages that already start with a flag,
 * and other errors, are returned as they are.
 */
export function nameTheFlag<S extends Spec>(spec: S, values: Partial<Record<keyof S, unknown>>, e: unknown): unknown {
  if (!(e instanceof UsageError) || e.message.startsWith('--')) return e;
  for (const [key, o] of Object.entries(spec)) {
    const v = values[key as keyof S];
    if (typeof v !== 'string' || v === '' || o.kind === 'file holding a token') continue;
    if ([':', ' ', '/', path.sep].some((c) => e.message.startsWith(v + c)))
      return new UsageError(`--${flagOf(key, o)} ${e.message}`, e.code);
  }
  return e;
}

/** A command handler whose UsageErrors name the flag they come from (nameTheFlag). */
export function namingFlags<S extends Spec>(
  spec: S,
  handler: (argv: Record<string, unknown>) => Promise<void>,
): (argv: object) => Promise<void> {
  return async (argv) => {
    try {
      await handler(argv as Record<string, unknown>);
    } catch (e) {
      let values: Partial<OptionsOf<S>>;
      try {
        values = resolveOptions(spec, argv as Record<string, unknown>);
      } catch {
        throw e;
      }
      throw nameTheFlag(spec, values, e);
    }
  };
}

/** Markdown table of a command's options (docs/cli.md is made of these). */
export function optionDocs<S extends Spec>(command: string, spec: S): string {
  const rows = Object.entries(spec)
    .filter(([, o]) => !o.hidden)
    .map(([key, o]) => {
      const d = defaultShown(o);
      const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
      return `| \`--${flagOf(key, o)}\`${o.demand ? ' (required)' : ''} | ${cell(o.kind)} | ${d === undefined ? '' : cell(`\`${d}\``)} | ${cell(o.describe)} |`;
    });
  return [`### kais ${command}`, '', '| flag | value | default | what |', '| --- | --- | --- | --- |', ...rows, ''].join('\n');
}
