/**
 * `kais agent` flag errors through the real CLI (dist/kais.js, built by `npm test` before jest):
 * exit 2 and one line naming the flag, before anything listens or connects.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';

const ROOT = path.resolve(__dirname, '../../..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

describe('kais agent flags', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-cli-'));
  const targets = path.join(dir, 'targets.json');
  fs.writeFileSync(targets, JSON.stringify({ nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:1', 'http://127.0.0.1:1'], cloud: 'http://127.0.0.1:1' }));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it.each([
    [['--experience', 'most'], /^kais: --experience: expected one of explored, all, none, got "most"$/],
    [['--explore', '2'], /^kais: --explore: expected a number >= 0 and <= 1, got "2"$/],
    [['--policy', 'fastest'], /^kais: --policy: unknown policy "fastest" \(known: cmmac, random, round-robin, jsq, p2c, greedy, onsocmax, prob, lec\)$/],
  ])('%j exits 2 with one line naming the flag', (extra, pattern) => {
    const r = spawnSync(process.execPath, [KAIS, 'agent', '--orchestrator', 'ws://127.0.0.1:1', '--eap', '0', '--scenario', 'tiny', '--targets', targets, ...extra], {
      encoding: 'utf8',
      timeout: 60000,
    });
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(pattern);
  });
});
