/**
 * `kais agent` flag errors through the real CLI (dist/kais.js, built by `npm test` before jest):
 * exit 2 and one line naming the flag, before anything listens or connects.
 */
import { spawn, spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { WebSocketServer } from 'ws';
import { decodeFrame } from '../../../shared/protocol/codec';

const ROOT = path.resolve(__dirname, '../../..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

describe('kais agent flags', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-cli-'));
  const targets = path.join(dir, 'targets.json');
  fs.writeFileSync(
    targets,
    JSON.stringify({ nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'], cloud: 'http://127.0.0.1:4' }),
  );
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const link = path.join(dir, 'cache-link');
  fs.mkdirSync(path.join(dir, 'real-cache'), { mode: 0o700 });
  fs.symlinkSync(path.join(dir, 'real-cache'), link);

  it.each([
    // the only line (the explore-0 log line came first)
    [['--cache', link], /^kais: --cache: \S+cache-link is a symbolic link; the cache must be a private directory$/],
    [['--experience', 'most'], /^kais: --experience: expected one of explored, all, none, got "most"$/],
    [['--explore', '2'], /^kais: --explore: expected a number >= 0 and <= 1, got "2"$/],
    [['--offline-buffer=-1'], /^kais: --offline-buffer: expected an integer >= 0 and <= 1000000, got "-1"$/],
    [['--offline-buffer', '1.5'], /^kais: --offline-buffer: expected an integer >= 0 and <= 1000000, got "1.5"$/],
    [
      ['--policy', 'fastest'],
      /^kais: --policy: unknown policy "fastest" \(known: cmmac, random, round-robin, jsq, p2c, greedy, onsocmax, prob, lec\)$/,
    ],
  ])('%j exits 2 with one line naming the flag', (extra, pattern) => {
    const r = spawnSync(
      process.execPath,
      [KAIS, 'agent', '--orchestrator', 'ws://127.0.0.1:1', '--eap', '0', '--scenario', 'tiny', '--targets', targets, ...extra],
      {
        encoding: 'utf8',
        timeout: 60000,
      },
    );
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(pattern);
  });
});

describe('kais agent token', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-token-'));
  const targets = path.join(dir, 'targets.json');
  fs.writeFileSync(
    targets,
    JSON.stringify({ nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'], cloud: 'http://127.0.0.1:4' }),
  );
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** The token of the first hello an agent started with `args` and `env` sends, and its command line. */
  async function helloToken(args: string[], env: Record<string, string>): Promise<{ token: string; argv: string }> {
    const wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
    const port = (wss.address() as { port: number }).port;
    const cache = path.join(dir, `cache-${port}`);
    const child = spawn(
      process.execPath,
      [
        KAIS,
        'agent',
        '--orchestrator',
        `ws://127.0.0.1:${port}`,
        '--eap',
        '0',
        '--scenario',
        'tiny',
        '--targets',
        targets,
        '--cache',
        cache,
        ...args,
      ],
      { env: { ...process.env, KAIS_AGENT_TOKEN: '', ...env }, stdio: 'ignore' },
    );
    try {
      const frame = await new Promise<Buffer>((resolve) => wss.once('connection', (ws) => ws.once('message', (d: Buffer) => resolve(d))));
      const r = decodeFrame(frame);
      if (!r.ok || r.frame.type !== 'hello') throw new Error('the first frame is not a hello');
      return { token: r.frame.body.token, argv: (child.spawnargs ?? []).join(' ') };
    } finally {
      await new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      });
      await new Promise<void>((resolve) => wss.close(() => resolve()));
    }
  }

  it('reads the hello token from --token-file, so it is not on the command line', async () => {
    const file = path.join(dir, 'token');
    fs.writeFileSync(file, 'file-secret\n', { mode: 0o600 });
    const r = await helloToken(['--token-file', file], {});
    expect(r.token).toBe('file-secret');
    expect(r.argv).not.toContain('file-secret');
  });

  it('reads it from $KAIS_AGENT_TOKEN when no flag gives one', async () => {
    expect((await helloToken([], { KAIS_AGENT_TOKEN: 'env-secret' })).token).toBe('env-secret');
  });

  it('still takes --token (scripts), which wins over the environment', async () => {
    expect((await helloToken(['--token', 'inline'], { KAIS_AGENT_TOKEN: 'env-secret' })).token).toBe('inline');
  });
});
