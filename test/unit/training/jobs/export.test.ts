/**
 * `kais export` (training/jobs/export.ts) writes model.json + weights.bin all or nothing: a target
 * that cannot take them is refused (a UsageError naming it: exit 2) before anything is written, and
 * a failure leaves no temporary file behind. (That the export computes the actor's function:
 * test/unit/shared/nets/actor-layers.test.ts.)
 */
import * as fs from 'fs';
import * as path from 'path';
import { checkLayersDir, exportLayers } from '../../../../training/jobs/export';
import { UsageError } from '../../../../shared/errors';
import { loadScenario } from '../../../../shared/scenario';
import { loadActorFile } from '../../../../training/jobs/checkpoint';
import { tmpDir } from '../../../support/tmp';

const ROOT = path.resolve(__dirname, '../../../..');
const SHIPPED_BIN = path.join(ROOT, 'models', 'kais-cmmac.bin');

/** A target folder holding an old weights.bin and `extra` (paths of folders inside it). */
function target(...folders: string[]): string {
  const dir = tmpDir('kais-export-');
  fs.writeFileSync(path.join(dir, 'weights.bin'), 'old');
  for (const f of folders) fs.mkdirSync(path.join(dir, f));
  return dir;
}

/** The UsageError `exportLayers` rejects with (fails when it resolves or rejects with anything else). */
async function refusal(dir: string): Promise<string> {
  const e = await exportLayers(SHIPPED_BIN, dir).then(
    () => null,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(UsageError);
  return (e as Error).message;
}

describe('kais export: all or nothing', () => {
  it('writes model.json and weights.bin over old ones, and no temporary file stays', async () => {
    const dir = target();
    fs.writeFileSync(path.join(dir, 'model.json'), 'old');
    const files = await exportLayers(SHIPPED_BIN, dir);
    expect(files).toEqual([path.join(dir, 'model.json'), path.join(dir, 'weights.bin')]);
    expect(fs.readdirSync(dir).sort()).toEqual(['model.json', 'weights.bin']);
    expect(JSON.parse(fs.readFileSync(path.join(dir, 'model.json'), 'utf8')).format).toBe('layers-model');
    expect(fs.statSync(path.join(dir, 'weights.bin')).size).toBeGreaterThan(1000);
  });

  it.each(['model.json', 'weights.bin'])(
    'refuses a folder where %s must go, naming it, before writing anything (it replaced weights.bin, then failed on a rename)',
    async (name) => {
      const dir = name === 'weights.bin' ? tmpDir('kais-export-') : target(name);
      if (name === 'weights.bin') fs.mkdirSync(path.join(dir, name));
      const before = fs.readdirSync(dir).sort();
      expect(await refusal(dir)).toBe(`${path.join(dir, name)}: is a folder, expected the layers model's file ${name}`);
      expect(fs.readdirSync(dir).sort()).toEqual(before);
      if (name === 'model.json') expect(fs.readFileSync(path.join(dir, 'weights.bin'), 'utf8')).toBe('old');
    },
  );

  it('refuses a --layers that is a file', async () => {
    const file = path.join(tmpDir('kais-export-'), 'f');
    fs.writeFileSync(file, 'x');
    expect(await refusal(file)).toBe(`${file}: exists and is not a folder`);
    expect(fs.readFileSync(file, 'utf8')).toBe('x');
  });

  it('a file that cannot be written is named, the files already there are kept, and the temporary files are removed', async () => {
    // the temporary model.json cannot be made (a folder holds its name): weights.bin's is already written then
    const blocker = `model.json.${process.pid}.tmp`;
    const dir = target(blocker);
    expect(await refusal(dir)).toBe(`${path.join(dir, 'model.json')}: cannot write (EISDIR)`);
    expect(fs.readdirSync(dir).sort()).toEqual([blocker, 'weights.bin']);
    expect(fs.readFileSync(path.join(dir, 'weights.bin'), 'utf8')).toBe('old');
  });
});

describe('checkLayersDir: the target tried before any work (kais train --export-layers checks it before training)', () => {
  it('a folder to be made (several levels) passes, and nothing of it is left', () => {
    const base = tmpDir('kais-export-');
    expect(() => checkLayersDir(path.join(base, 'a', 'b', 'c'))).not.toThrow();
    expect(fs.readdirSync(base)).toEqual([]);
  });

  it('an existing folder passes, and its probe file is gone', () => {
    const dir = target();
    expect(() => checkLayersDir(dir)).not.toThrow();
    expect(fs.readdirSync(dir)).toEqual(['weights.bin']);
  });

  it('a path under a file is refused naming it (not a raw ENOTDIR)', () => {
    const file = path.join(tmpDir('kais-export-'), 'f');
    fs.writeFileSync(file, 'x');
    expect(() => checkLayersDir(path.join(file, 'sub'))).toThrow(new UsageError(`${path.join(file, 'sub')}: cannot create (ENOTDIR)`));
  });

  // sysfs and procfs take no new folder, even for root (whom access() calls able to write anywhere);
  // under /proc Node's recursive mkdir never returns, so kais export hung there
  const special = [
    ['/sys/kais-export-layers', '/sys/kernel'],
    ['/proc/kais-export-layers/x', '/proc/self'],
  ].filter(([, there]) => fs.existsSync(there));
  it.each(special.map(([dir]) => dir))('refuses %s: cannot create, and nothing is made', (dir) => {
    expect(() => checkLayersDir(dir)).toThrow(UsageError);
    expect(() => checkLayersDir(dir)).toThrow(new RegExp(`^${dir}: cannot create \\(E[A-Z]+\\)$`));
    expect(fs.existsSync(dir)).toBe(false);
  });
});

describe("an exported actor's head: kais export and the cmmac loader refuse one that is not relu1 or softplus1", () => {
  const dir = tmpDir('kais-export-head-');
  const file = path.join(dir, 'a.bin');
  fs.copyFileSync(path.join(__dirname, '../../../../models/kais-cmmac.bin'), file);
  const meta = JSON.parse(fs.readFileSync(path.join(__dirname, '../../../../models/kais-cmmac.bin.json'), 'utf8')) as Record<
    string,
    unknown
  >;
  fs.writeFileSync(`${file}.json`, JSON.stringify({ ...meta, head: 'bogus' }));

  it('kais export: one line naming the field, nothing written', async () => {
    const out = path.join(dir, 'layers');
    await expect(exportLayers(file, out)).rejects.toThrow(/a\.bin\.json: head must be relu1 or softplus1 .*got "bogus"/);
    expect(fs.existsSync(path.join(out, 'model.json'))).toBe(false);
  });

  it('loadActorFile (kais eval --checkpoint, kais up): the same line', () => {
    expect(() => loadActorFile(file, loadScenario('kais'))).toThrow(UsageError);
    expect(() => loadActorFile(file, loadScenario('kais'))).toThrow(/head must be relu1 or softplus1/);
  });
});
