/**
 * What `npm pack` ships (package.json `files`): the built CLI, its JSON, the shipped model (and its
 * TensorFlow.js layers export, models/kais-cmmac-tfjs/), the built-in curriculum and the docs; no
 * tests, sources, source maps, CI files or measurement scripts. Installing the tarball in an empty folder and running `npx kais eval --scenario kais
 * --frames 2` and `npx kais up --duration 10` was checked by hand (docs/runtime.md, packaging);
 * it needs the registry, so it is not part of `npm test`.
 */
import { execFileSync } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

const root = path.resolve(__dirname, '../..');

describe('npm pack', () => {
  const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  });
  const files: string[] = (JSON.parse(out) as { files: { path: string }[] }[])[0].files.map((f) => f.path);

  it('holds what the CLI needs at run time', () => {
    for (const f of [
      'dist/kais.js',
      'dist/launcher/up.js',
      'dist/shared/lifecycle.js',
      'dist/shared/scenarios/kais.json',
      'models/kais-cmmac.bin',
      'models/kais-cmmac.bin.json',
      'models/kais-cmmac-gpg.bin',
      'models/kais-cmmac-gpg.bin.json',
      'models/kais-cmmac-tfjs/model.json',
      'models/kais-cmmac-tfjs/weights.bin',
      'models/kais-cmmac-gpg-tfjs/model.json',
      'models/kais-cmmac-gpg-tfjs/weights.bin',
      'models/kais-gpg.json',
      'models/kais-gpg-lightgate.json',
      'models/kais-gpg-switch.json',
      'models/kais-gpg-gate.json',
      'models/kais-gpg-scale-in.json',
      'models/kais-gpg-lean.json',
      'models/kais-cmmac-drawn.bin',
      'models/kais-cmmac-drawn.bin.json',
      'training/curriculum/lessons/01-clone-lec.json',
      'LICENSE',
      'README.md',
    ]) {
      expect(files).toContain(f);
    }
  });

  it('holds no tests, sources, maps, CI files or measurement scripts', () => {
    const bad = files.filter((f) => /^test\/|^\.ci\/|^scripts\/|^dist\/scripts\/|\.map$|(?<!\.d)\.ts$/.test(f));
    expect(bad).toEqual([]);
  });

  it('names its licence', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { license: string };
    expect(pkg.license).toBe('MIT');
    expect(fs.readFileSync(path.join(root, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
  });
});
