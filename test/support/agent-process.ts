/**
 * `kais agent` as the tests drive it: a request to its ingress, and the agent as a process (the
 * built CLI) with its port read from the ready line.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as http from 'node:http';
import * as path from 'node:path';

const KAIS = path.resolve(__dirname, '..', '..', 'dist', 'kais.js');

/** POST /request to an agent's ingress; resolves with the HTTP status. */
export function postStatus(port: number, body: unknown): Promise<number> {
  const text = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/request', method: 'POST', agent: false, headers: { 'content-length': Buffer.byteLength(text) } },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      },
    );
    req.on('error', reject);
    req.end(text);
  });
}

export interface AgentProcess {
  proc: ChildProcess;
  /** The ingress port from the ready line; rejects if the agent exits first (with its stderr). */
  port: Promise<number>;
  /** Everything it wrote to stderr so far (`tail`: the last 20 chunks only, for a chatty agent). */
  stderr: () => string;
}

/** `kais agent <args>` (KAIS_EXIT_WITH_PARENT set: it never outlives the test run). */
export function spawnAgent(args: string[], options: { tail?: boolean } = {}): AgentProcess {
  const proc = spawn(process.execPath, [KAIS, 'agent', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, KAIS_EXIT_WITH_PARENT: '1' },
  });
  const chunks: string[] = [];
  // read on, so that its writes never block
  proc.stderr!.on('data', (c: Buffer) => {
    chunks.push(c.toString());
    if (options.tail && chunks.length > 20) chunks.shift();
  });
  const port = new Promise<number>((resolve, reject) => {
    let out = '';
    proc.stdout!.on('data', (c: Buffer) => {
      out += c.toString();
      const m = /"port":(\d+)/.exec(out);
      if (m) resolve(Number(m[1]));
    });
    proc.once('exit', (code) => reject(new Error(`kais agent exited (${code}): ${chunks.join('')}`)));
  });
  port.catch(() => undefined);
  return { proc, port, stderr: () => chunks.join('') };
}

/** The flags of an agent for eAP 0 of the tiny scenario on a free port. */
export function tinyAgentArgs(orchestratorUrl: string, targetsFile: string, cacheDir: string): string[] {
  return [
    '--orchestrator',
    orchestratorUrl,
    '--eap',
    '0',
    '--targets',
    targetsFile,
    '--scenario',
    'tiny',
    '--port',
    '0',
    '--cache',
    cacheDir,
  ];
}
