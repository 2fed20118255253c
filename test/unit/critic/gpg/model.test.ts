/**
 * critic/gpg/model.ts: a GPG model file's fields are checked before its net is built (an absurd
 * config hung `kais eval` or ran out of memory), and fields it does not know are refused.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tf from '@tensorflow/tfjs';
import { UsageError } from '../../../../shared/errors';
import { loadScenario } from '../../../../shared/scenario';
import { GpgNet } from '../../../../critic/gpg/gnn';
import { loadGpgModel } from '../../../../critic/gpg/load';
import { GPG_CONFIG_LIMITS, gpgModelFromJson, gpgModelToJson } from '../../../../critic/gpg/model';
import { tmpDir } from '../../../support/tmp';

const MODELS = path.resolve(__dirname, '../../../../models');
const SMALL = { hidden: [16], headHidden: [32, 16], embed: 8 };

describe('GPG model file: config and fields', () => {
  afterEach(() => tf.disposeVariables());
  const text = () => gpgModelToJson(new GpgNet(4, 9, SMALL), { scenario: 'tiny' });
  /** The model of `text()` with `config` fields replaced (undefined: removed). */
  const withConfig = (fields: Record<string, unknown>): string => {
    const m = JSON.parse(text()) as { config: Record<string, unknown> };
    m.config = { ...m.config, ...fields };
    for (const [k, v] of Object.entries(fields)) if (v === undefined) delete m.config[k];
    return JSON.stringify(m);
  };

  it('loads every model the project ships, and round-trips a stacking-encoder net', () => {
    const files = fs.readdirSync(MODELS).filter((n) => n.endsWith('.json') && !n.endsWith('.bin.json'));
    expect(files.length).toBeGreaterThanOrEqual(4);
    for (const name of files) {
      const m = JSON.parse(fs.readFileSync(path.join(MODELS, name), 'utf8')) as { scenario: string };
      const { net } = loadGpgModel(path.join(MODELS, name), loadScenario(m.scenario), '--gpg');
      expect(net.config.rounds).toBe(2);
      net.dispose();
    }
    const stack = new GpgNet(4, 9, { ...SMALL, encoder: 'stack' });
    expect(gpgModelFromJson(gpgModelToJson(stack, { scenario: 'tiny' }), 4).net.getWeights()).toEqual(stack.getWeights());
  });

  it.each([
    ['rounds 1e9 (hung kais eval)', { rounds: 1e9 }, `config.rounds must be an integer in 1..${GPG_CONFIG_LIMITS.rounds}, got 1000000000`],
    ['rounds 0', { rounds: 0 }, 'config.rounds must be an integer in 1..8, got 0'],
    ['rounds 2.5', { rounds: 2.5 }, 'config.rounds must be an integer in 1..8, got 2.5'],
    ['embed "16" (a string)', { embed: '16' }, 'config.embed must be an integer in 1..256, got "16"'],
    ['embed 1e6', { embed: 1e6 }, 'config.embed must be an integer in 1..256, got 1000000'],
    ['hidden [1e5, 1e5] (an internal error)', { hidden: [1e5, 1e5] }, 'config.hidden[0] must be an integer in 1..512, got 100000'],
    ['hidden [16, -1]', { hidden: [16, -1] }, 'config.hidden[1] must be an integer in 1..512, got -1'],
    ['hidden 64', { hidden: 64 }, 'config.hidden must be a list of at most 6 layer widths, got 64'],
    ['headHidden of 7 layers', { headHidden: [8, 8, 8, 8, 8, 8, 8] }, 'config.headHidden must be a list of at most 6 layer widths'],
    ['encoder "gcn"', { encoder: 'gcn' }, 'config.encoder must be "gnn" or "stack", got "gcn"'],
    ['an unknown field', { round: 2 }, 'config: unknown field "round" (fields: encoder, embed, rounds, hidden, headHidden)'],
  ])('refuses config with %s, naming the field', (_name, fields, message) => {
    const t0 = Date.now();
    expect(() => gpgModelFromJson(withConfig(fields), 4)).toThrow(message);
    expect(Date.now() - t0).toBeLessThan(5000);
  });

  it('refuses a config that is not an object, and an unknown top-level field', () => {
    const m = JSON.parse(text()) as Record<string, unknown>;
    expect(() => gpgModelFromJson(JSON.stringify({ ...m, config: null }), 4)).toThrow('config must be an object, got null');
    expect(() => gpgModelFromJson(JSON.stringify({ ...m, config: [1] }), 4)).toThrow('config must be an object, got [1]');
    expect(() => gpgModelFromJson(JSON.stringify({ ...m, nodesPerFrme: 6 }), 4)).toThrow(
      /^unknown field "nodesPerFrme" \(fields: format, /,
    );
  });

  it('says it in one line through the loader, naming the flag and the file', () => {
    const file = path.join(tmpDir('kais-gpg-config-'), 'huge.json');
    fs.writeFileSync(file, withConfig({ rounds: 1e9 }));
    const tiny = loadScenario('tiny');
    expect(() => loadGpgModel(file, tiny, '--gpg')).toThrow(UsageError);
    expect(() => loadGpgModel(file, tiny, '--gpg')).toThrow(`--gpg: ${file}: config.rounds must be an integer in 1..8, got 1000000000`);
  });
});
