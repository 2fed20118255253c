/**
 * kais node's admin server: the requests that change the cluster (POST /scale, PUT /fault,
 * PUT /placement) need the admin token; reads stay open. In-process (EmulatedCluster and the
 * orchestrator's EmulatedExecutor) and through the built CLI (dist/kais.js, built by `npm test`).
 */
import { spawn } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { EmulatedCluster } from '../../../orchestrator/emulated-cluster';
import { EmulatedExecutor } from '../../../orchestrator/executors';
import { loadScenario } from '../../../shared/scenario';

const tiny = loadScenario('tiny');
const KAIS = path.resolve(__dirname, '../../..', 'dist', 'kais.js');

async function put(url: string, body: unknown, token?: string): Promise<number> {
  const r = await fetch(url, {
    method: 'PUT',
    body: JSON.stringify(body),
    headers: token === undefined ? {} : { authorization: `Bearer ${token}` },
  });
  await r.text();
  return r.status;
}

describe('node admin auth (in-process)', () => {
  let cluster: EmulatedCluster;
  beforeAll(async () => {
    cluster = new EmulatedCluster({ scenario: tiny, adminToken: 's3cret' });
    await cluster.listen();
  });
  afterAll(() => cluster.close());

  it('refuses changes without the token, or with another one, and leaves the cluster as it was', async () => {
    expect(await put(`${cluster.adminUrl}/fault`, { node: 0, state: 'failed' })).toBe(401);
    expect(await put(`${cluster.adminUrl}/fault`, { node: 0, state: 'failed' }, 'guess')).toBe(401);
    expect(await put(`${cluster.adminUrl}/placement`, { d: [[0, 0, 0]] }, 's3cre')).toBe(401);
    const faults = (await (await fetch(`${cluster.adminUrl}/faults`)).json()) as { states: string[] };
    expect(faults.states).toEqual(['ok', 'ok', 'ok']);
  });

  it('accepts them with the token', async () => {
    expect(await put(`${cluster.adminUrl}/fault`, { node: 0, state: 'abnormal' }, 's3cret')).toBe(200);
    const faults = (await (await fetch(`${cluster.adminUrl}/faults`)).json()) as { states: string[] };
    expect(faults.states[0]).toBe('abnormal');
    expect(await put(`${cluster.adminUrl}/fault`, { node: 0, state: 'ok' }, 's3cret')).toBe(200);
  });

  it("the orchestrator's executor sends the token with its orders (and fails loudly without it)", async () => {
    const held = (await new EmulatedExecutor(cluster.adminUrl, tiny).placement())!;
    const op = { service: 0, node: 0, delta: held[0][0] > 0 ? -1 : 1 };
    await expect(new EmulatedExecutor(cluster.adminUrl, tiny).apply([op])).rejects.toThrow(/401/);
    const rep = await new EmulatedExecutor(cluster.adminUrl, tiny, undefined, undefined, 's3cret').apply([op]);
    expect(rep.executed.length + rep.refused).toBe(1);
  });
});

describe('kais node admin token (built CLI)', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-node-auth-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  /** Starts kais node, returns its ready line and a stop function. */
  async function startNode(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ ready: Record<string, unknown>; stop: () => Promise<void> }> {
    const child = spawn(process.execPath, [KAIS, 'node', '--scenario', 'tiny', ...args], {
      env: { ...process.env, KAIS_NODE_ADMIN_TOKEN: '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const line = await new Promise<string>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        if (out.includes('\n')) resolve(out.split('\n')[0]);
      });
      child.once('exit', (code) => reject(new Error(`kais node exited ${code}`)));
    });
    const stop = () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      });
    return { ready: JSON.parse(line) as Record<string, unknown>, stop };
  }

  it('makes a token when given none, prints it once in the ready line, and checks it', async () => {
    const { ready, stop } = await startNode([]);
    try {
      expect(typeof ready.adminToken).toBe('string');
      expect((ready.adminToken as string).length).toBeGreaterThanOrEqual(20);
      expect(await put(`${String(ready.admin)}/fault`, { node: 0, state: 'failed' })).toBe(401);
      expect(await put(`${String(ready.admin)}/fault`, { node: 1, state: 'abnormal' }, ready.adminToken as string)).toBe(200);
    } finally {
      await stop();
    }
  });

  it('takes the token from --admin-token-file (then prints none)', async () => {
    const file = path.join(dir, 'admin-token');
    fs.writeFileSync(file, 'from-a-file\n', { mode: 0o600 });
    const { ready, stop } = await startNode(['--admin-token-file', file]);
    try {
      expect(ready.adminToken).toBeUndefined();
      expect(await put(`${String(ready.admin)}/fault`, { node: 0, state: 'abnormal' }, 'from-a-file')).toBe(200);
      expect(await put(`${String(ready.admin)}/fault`, { node: 0, state: 'abnormal' })).toBe(401);
    } finally {
      await stop();
    }
  });

  it('takes the token from $KAIS_NODE_ADMIN_TOKEN', async () => {
    const { ready, stop } = await startNode([], { KAIS_NODE_ADMIN_TOKEN: 'from-env' });
    try {
      expect(ready.adminToken).toBeUndefined();
      expect(await put(`${String(ready.admin)}/fault`, { node: 0, state: 'abnormal' }, 'from-env')).toBe(200);
    } finally {
      await stop();
    }
  });
});
