/**
 * `kais agent` as a process: a second SIGTERM (or SIGINT) while it drains keeps the drain. With
 * process.once the second signal reached Node's default handler: exit 143, and every request the
 * agent held was reset (curl: empty reply). docs/runtime.md: it exits 0 on SIGTERM/SIGINT, after
 * answering what it holds.
 */
import type { ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { EmulatedCluster } from '../../orchestrator/emulated-cluster';
import { loadScenario } from '../../shared/scenario';
import { postStatus, spawnAgent, tinyAgentArgs } from '../support/agent-process';

const scenario = loadScenario('tiny');

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
      const started = spawnAgent([...tinyAgentArgs('ws://127.0.0.1:1', targets, path.join(dir, 'cache')), '--policy', 'lec']);
      const a = started.proc;
      agent = a;
      const saw = (text: string) =>
        new Promise<void>((resolve) => {
          const check = () => {
            if (started.stderr().includes(text)) {
              a.stderr!.off('data', check);
              resolve();
            }
          };
          a.stderr!.on('data', check);
          check();
        });
      const exit = new Promise<number | string>((resolve) => a.once('exit', (code, sig) => resolve(code ?? sig ?? -1)));
      const port = await started.port;
      // requests the cluster holds for about a second of work each
      const answers = Promise.all(
        Array.from({ length: 3 }, () => postStatus(port, { service: 0, deadlineMs: 20_000, payloadBytes: 100, workCoreS: 1 })),
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
