/**
 * `exitWithParent` (shared/lifecycle.ts) on real processes, from dist/ (built by `npm test`): a process
 * whose parent dies exits by itself when KAIS_EXIT_WITH_PARENT is set, and outlives it otherwise.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

const LIFECYCLE = path.resolve(__dirname, '..', '..', '..', 'dist', 'shared', 'lifecycle.js');

/** Starts parent -> child; the parent exits once the child is watching; resolves the child's pid. */
function orphan(env: NodeJS.ProcessEnv): Promise<number> {
  const child = `require(${JSON.stringify(LIFECYCLE)}).exitWithParent(() => process.exit(0)); setInterval(() => {}, 1000); console.log('armed');`;
  const parent = `
    const c = require('child_process').spawn(process.execPath, ['-e', ${JSON.stringify(child)}], { stdio: ['ignore', 'pipe', 'inherit'] });
    c.stdout.once('data', () => { console.log(c.pid); process.exit(0); });`;
  return new Promise((resolve, reject) => {
    const p = spawn(process.execPath, ['-e', parent], { stdio: ['ignore', 'pipe', 'inherit'], env });
    let out = '';
    p.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    p.once('exit', (code) => (code === 0 ? resolve(Number(out.trim())) : reject(new Error(`parent exited ${code}`))));
  });
}

/** Running (not gone, not a zombie waiting for a reaper). */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function runningAfter(pid: number, ms: number): Promise<boolean> {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (!running(pid)) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return running(pid);
}

const linux = process.platform === 'linux' ? describe : describe.skip;

linux('exitWithParent', () => {
  it('makes a process exit within about 0.5 s of its parent when KAIS_EXIT_WITH_PARENT is set', async () => {
    const pid = await orphan({ ...process.env, KAIS_EXIT_WITH_PARENT: '1' });
    expect(await runningAfter(pid, 3000)).toBe(false);
  });

  it('does nothing without KAIS_EXIT_WITH_PARENT', async () => {
    const env = { ...process.env };
    delete env.KAIS_EXIT_WITH_PARENT;
    const pid = await orphan(env);
    try {
      expect(await runningAfter(pid, 1200)).toBe(true);
    } finally {
      process.kill(pid, 'SIGKILL');
    }
  });
});
