/**
 * `kais agent` as a process: a second SIGTERM (or SIGINT) while it drains keeps the drain. With
 * process.once the second signal reached Node's default handler: exit 143, and every request the
 * agent held was reset (curl: empty reply). docs/runtime.md: it exits 0 on SIGTERM/SIGINT, after
 * answering what it holds.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { loadScenario } from '../../shared/scenario';

const KAIS = path.resolve(__dirname, '..', '..', 'dist', 'kais.js');
const scenario = loadScenario('tiny');

function post(port: number, body: unknown): Promise<number> {
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

function getJson(port: number, p: string): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: p, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>));
      })
      .on('error', reject);
  });
}

describe('kais agent and signals', () => {
  let dir: string;
  let cluster: EmulatedCluster;
  let agent: ChildProcess | null = null;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-signals-'));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
  });

  afterEach(async () => {
    if (agent && agent.exitCode === null && agent.signalCode === null) {
      const exited = new Promise((resolve) => agent!.once('exit', resolve));
      agent.kill('SIGKILL');
      await exited;
    }
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it.each(['SIGTERM', 'SIGINT'] as const)(
    'a second %s while draining: the requests held are answered, exit 0',
    async (signal) => {
      const targets = path.join(dir, 'targets.json');
      fs.writeFileSync(targets, JSON.stringify({ nodes: cluster.nodeUrls, cloud: cluster.cloudUrl }));
      // no orchestrator (nothing listens on port 1): the agent dispatches on the scenario's placement
      const a = spawn(
        process.execPath,
        [
          KAIS,
          'agent',
          '--orchestrator',
          'ws://127.0.0.1:1',
          '--eap',
          '0',
          '--targets',
          targets,
          '--scenario',
          'tiny',
          '--port',
          '0',
          '--cache',
          path.join(dir, 'cache'),
          '--policy',
          'lec',
        ],
        { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, KAIS_EXIT_WITH_PARENT: '1' } },
      );
      agent = a;
      let err = '';
      const saw = (text: string) =>
        new Promise<void>((resolve) => {
          const check = () => {
            if (err.includes(text)) {
              a.stderr!.off('data', check);
              resolve();
            }
          };
          a.stderr!.on('data', check);
          check();
        });
      a.stderr!.on('data', (c: Buffer) => (err += c.toString()));
      const exit = new Promise<number | string>((resolve) => a.once('exit', (code, sig) => resolve(code ?? sig ?? -1)));
      const port = await new Promise<number>((resolve, reject) => {
        let out = '';
        a.stdout!.on('data', (c: Buffer) => {
          out += c.toString();
          const m = /"port":(\d+)/.exec(out);
          if (m) resolve(Number(m[1]));
        });
        a.once('exit', (code) => reject(new Error(`kais agent exited (${code}): ${err}`)));
      });
      // requests the cluster holds for about a second of work each
      const answers = Promise.all(
        Array.from({ length: 3 }, () => post(port, { service: 0, deadlineMs: 20_000, payloadBytes: 100, workCoreS: 1 })),
      );
      for (;;) {
        const h = await getJson(port, '/healthz');
        if ((h.outstanding as number) >= 3) break;
        await new Promise((r) => setTimeout(r, 20));
      }
      a.kill(signal);
      await saw('draining');
      a.kill(signal);
      await saw('already draining');
      expect(await answers).toEqual([200, 200, 200]);
      expect(await exit).toBe(0);
    },
    60_000,
  );
});
