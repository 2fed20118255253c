/**
 * The option specs (shared/config.ts): parsing and checks of each kind, defaults, and docs/cli.md
 * kept in sync with the specs the commands run with.
 */
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { checkOptions, defaultsOf, givenOptions, nameTheFlag, opt, readInputFile, resolveOptions } from '../../../shared/config';
import { resolveSecret } from '../../../shared/lifecycle';
import { UsageError } from '../../../shared/errors';
import { cliReference } from '../../../scripts/cli-docs';
import { TRAIN_DEFAULTS, TRAIN_SPEC } from '../../../training/jobs/train-options';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-config-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const spec = {
  frames: opt.integer({ default: 20, min: 1, max: 1000, describe: 'frames' }),
  load: opt.number({ default: 1, min: 0, minExclusive: true, max: 100, describe: 'load' }),
  head: opt.choice(['softplus1', 'relu1'] as const, { default: 'softplus1', describe: 'head' }),
  trace: opt.file({ describe: 'a file' }),
  out: opt.outFile({ default: 'x.db', sqlite: true, describe: 'out' }),
  cache: opt.outDir({ describe: 'cache' }),
  url: opt.url(['ws:', 'wss:'], { default: 'ws://localhost:1', describe: 'url' }),
  window: opt.custom<[number, number]>('from,to', { flag: 'win', describe: 'window' }, (t) => {
    const [a, b] = t.split(',').map(Number);
    return [a, b];
  }),
};

function problem(argv: Record<string, unknown>): string {
  try {
    givenOptions(spec, argv);
  } catch (e) {
    expect(e).toBeInstanceOf(UsageError);
    return (e as Error).message;
  }
  throw new Error('no problem found');
}

describe('option specs', () => {
  it('fills defaults and parses what was given', () => {
    const o = resolveOptions(spec, { frames: '7', load: '2.5', head: 'relu1' });
    expect(o).toMatchObject({ frames: 7, load: 2.5, head: 'relu1', out: 'x.db', url: 'ws://localhost:1' });
    expect(o.trace).toBeUndefined();
  });

  it('leaves out what was not given (a command can tell "absent" from "the default")', () => {
    expect(givenOptions(spec, { frames: '3' })).toEqual({ frames: 3 });
  });

  it('refuses numbers that are not finite, not integers or out of range, naming the flag', () => {
    expect(problem({ frames: '1e308' })).toBe('--frames: expected an integer >= 1 and <= 1000, got "1e308"');
    expect(problem({ frames: '2.5' })).toMatch(/^--frames: expected an integer/);
    expect(problem({ frames: '' })).toMatch(/^--frames: /);
    expect(problem({ load: 'NaN' })).toMatch(/^--load: expected a number > 0/);
    expect(problem({ load: 'Infinity' })).toMatch(/^--load: .*finite/);
    expect(problem({ load: '-1' })).toMatch(/^--load: /);
    expect(problem({ load: '0x10' })).toMatch(/^--load: /);
  });

  it('takes the last of a repeated flag', () => {
    expect(givenOptions(spec, { frames: ['3', '5'] })).toEqual({ frames: 5 });
  });

  it('refuses a choice outside the list on one line', () => {
    const m = problem({ head: 'tanh' });
    expect(m).toBe('--head: expected one of softplus1, relu1, got "tanh"');
    expect(m).not.toMatch(/\n/);
  });

  it('checks files, output files, folders and URLs before any work', () => {
    const file = path.join(tmp, 'f.txt');
    fs.writeFileSync(file, 'hello');
    expect(problem({ trace: path.join(tmp, 'missing') })).toMatch(/^--trace: .* does not exist$/);
    expect(problem({ trace: tmp })).toMatch(/^--trace: .* is a folder, expected a file$/);
    expect(problem({ trace: '/dev/zero' })).toMatch(/^--trace: \/dev\/zero is not a regular file$/);
    expect(problem({ out: path.join(tmp, 'no', 'such', 'x.db') })).toMatch(/^--out: folder .* does not exist$/);
    expect(problem({ out: tmp })).toMatch(/^--out: .* is not a regular file$/);
    expect(problem({ out: file })).toMatch(/^--out: .* is not a SQLite database$/);
    expect(problem({ cache: file })).toMatch(/^--cache: .* is not a folder$/);
    expect(givenOptions(spec, { cache: path.join(tmp, 'a', 'b') })).toEqual({ cache: path.join(tmp, 'a', 'b') });
    expect(problem({ url: 'ws://[zz' })).toMatch(/^--url: expected a ws:\/\/ or wss:\/\/ URL/);
    expect(problem({ url: 'http://host:1' })).toMatch(/^--url: /);
  });

  it('uses the flag name of an option whose key differs', () => {
    expect(givenOptions(spec, { win: '1,2' })).toEqual({ window: [1, 2] });
  });

  it('checks options given in code the same way (train() and friends)', () => {
    expect(() => checkOptions(spec, { frames: 1e308 })).toThrow(/^--frames: /);
    expect(() => checkOptions(spec, { load: NaN })).toThrow(/^--load: /);
    expect(() => checkOptions(spec, { frames: 5, load: 2 })).not.toThrow();
  });

  it('reads a token from a file or the environment, and refuses two ways at once', () => {
    const tokenFile = path.join(tmp, 'token');
    fs.writeFileSync(tokenFile, 's3cret\n');
    const tspec = { tokenFile: opt.secretFile({ describe: 't' }) };
    expect(givenOptions(tspec, { 'token-file': tokenFile })).toEqual({ tokenFile: 's3cret' });
    fs.writeFileSync(path.join(tmp, 'big'), 'x'.repeat(10000));
    expect(() => givenOptions(tspec, { 'token-file': path.join(tmp, 'big') })).toThrow(/^--token-file: .*more than a token/);
    expect(() =>
      resolveSecret({ inline: 'a', inlineFlag: 'token', fromFile: 'b', fileFlag: 'token-file', env: 'KAIS_TEST_TOKEN' }),
    ).toThrow(/^--token: give the token once/);
    expect(() => resolveSecret({ inline: '', inlineFlag: 'token', fileFlag: 'token-file', env: 'KAIS_TEST_TOKEN' })).toThrow(
      /^--token: empty/,
    );
    process.env.KAIS_TEST_TOKEN = 'from-env';
    expect(resolveSecret({ inlineFlag: 'token', fileFlag: 'token-file', env: 'KAIS_TEST_TOKEN' })).toBe('from-env');
    delete process.env.KAIS_TEST_TOKEN;
  });
});

describe('nameTheFlag', () => {
  it("puts the flag in front of a file's problem that names the file, and leaves other errors alone", () => {
    const values = { trace: 'runs/t.csv', out: 'a.db' };
    const named = nameTheFlag(spec, values, new UsageError('a.db: trained on scenario "tiny", not "kais"')) as Error;
    expect(named).toBeInstanceOf(UsageError);
    expect(named.message).toBe('--out a.db: trained on scenario "tiny", not "kais"');
    expect((nameTheFlag(spec, values, new UsageError('runs/t.csv/batch_task.csv: empty')) as Error).message).toBe(
      '--trace runs/t.csv/batch_task.csv: empty',
    );
    const already = new UsageError('--load: expected a number');
    expect(nameTheFlag(spec, values, already)).toBe(already);
    const bug = new TypeError('a.db: oops');
    expect(nameTheFlag(spec, values, bug)).toBe(bug);
  });
});

describe('kais train options', () => {
  it('has one source for its defaults, in the order a run stores them', () => {
    const { scenario, ...rest } = defaultsOf(TRAIN_SPEC);
    expect(scenario).toBe('kais');
    expect(TRAIN_DEFAULTS).toEqual(rest);
    expect(Object.keys(TRAIN_DEFAULTS).slice(0, 3)).toEqual(['workload', 'trace', 'load']);
    expect(Object.keys(TRAIN_DEFAULTS).slice(-3)).toEqual(['out', 'resume', 'json']);
    expect(TRAIN_DEFAULTS).toMatchObject({ lr: 1e-4, entropyCoef: 0.003, bcLr: 5e-4 });
  });
});

describe('docs/cli.md', () => {
  it('is what the option specs make (npm run docs:cli regenerates it)', () => {
    const file = path.join(__dirname, '..', '..', '..', 'docs', 'cli.md');
    expect(fs.readFileSync(file, 'utf8')).toBe(cliReference());
  });
});

describe('readInputFile: a JSON input is UTF-8 text', () => {
  const write = (name: string, bytes: Buffer) => {
    const f = path.join(tmp, name);
    fs.writeFileSync(f, bytes);
    return f;
  };
  it('reads UTF-8, with or without a BOM', () => {
    expect(readInputFile(write('a.json', Buffer.from('{"a":"é"}')), '--scenario')).toBe('{"a":"é"}');
    expect(readInputFile(write('b.json', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')])), '--scenario')).toBe('{}');
  });
  it('refuses UTF-16, NUL bytes and bytes that are no UTF-8, in one line naming the flag and file', () => {
    const utf16 = write('c.json', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('{}', 'utf16le')]));
    expect(() => readInputFile(utf16, '--scenario')).toThrow(new UsageError(`--scenario: ${utf16} is UTF-16 text: save it as UTF-8`));
    const nul = write('d.json', Buffer.from('{"a":\0}'));
    expect(() => readInputFile(nul, '--targets')).toThrow(/^--targets: \S+d\.json holds binary data \(a NUL byte at offset 5\), not text$/);
    const latin1 = write('e.json', Buffer.from('{"a":"\xe9"}', 'latin1'));
    expect(() => readInputFile(latin1, '--curriculum')).toThrow(/^--curriculum: \S+e\.json is not UTF-8 text$/);
  });
});
