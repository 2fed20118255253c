/**
 * `kais nodes --by`: who holds a node out or re-admits it. Like --reason it is only meaningful with
 * --hold or --readmit, so without one it is exit 2 and one line naming --by (it was accepted and
 * dropped in silence: its default, $USER, hid whether it was given). With a change it is sent as
 * given, and when it is not given $USER (else "admin") is. Runs against a fake admin API that
 * records what it is asked.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInProcess } from '../../support/in-process';
import { optionDocs } from '../../../shared/config';
import { NODES_SPEC } from '../../../orchestrator/admin-cli';

interface Seen {
  method: string;
  url: string;
  body: Record<string, unknown> | null;
}
const seen: Seen[] = [];
let server: http.Server;
let url = '';
const saved = { token: process.env.KAIS_ADMIN_TOKEN, user: process.env.USER };

beforeAll(async () => {
  process.env.KAIS_ADMIN_TOKEN = 'a-token-long-enough-for-this';
  server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      seen.push({ method: req.method ?? '', url: req.url ?? '', body: text ? (JSON.parse(text) as Record<string, unknown>) : null });
      const status = { placement: [[1, 0, 2]], agents: [], overrides: [], holds: [] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ ...status, message: 'done' }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
beforeEach(() => {
  seen.length = 0;
  process.env.USER = 'jest-user';
});
afterAll(async () => {
  for (const [k, v] of [
    ['KAIS_ADMIN_TOKEN', saved.token],
    ['USER', saved.user],
  ] as const) {
    if (v === undefined) delete process.env[k];
    else process.env[k] = v;
  }
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

const nodes = (...args: string[]) => runInProcess(['nodes', '--orchestrator', url, ...args]);

describe('kais nodes --by', () => {
  it('without --hold or --readmit: exit 2, one line naming --by, and no call to the orchestrator', async () => {
    const r = await nodes('--by', 'x');
    const lines = r.stderr.trim().split('\n');
    expect({ code: r.code, lines }).toEqual({
      code: 2,
      lines: ['kais: --by: only with --hold or --readmit (listing the nodes records nothing)'],
    });
    expect(seen).toEqual([]);
  });

  it('listing the nodes without --by still works ($USER is only a default, not a given --by)', async () => {
    const r = await nodes();
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual(['GET /v1/status']);
  });

  it.each([
    ['hold', ['--hold', '1', '--reason', 'disk', '--by', 'ann'], { node: 1, reason: 'disk', by: 'ann' }],
    ['readmit', ['--readmit', '2', '--reason', 'fixed', '--by', 'bob'], { node: 2, reason: 'fixed', by: 'bob' }],
    ['hold', ['--hold', '1', '--reason', 'disk'], { node: 1, reason: 'disk', by: 'jest-user' }],
  ])('with --%s: sent as given, $USER when not given (%j)', async (change, args, body) => {
    const r = await nodes(...args);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(seen).toEqual([{ method: 'POST', url: `/v1/nodes/${change}`, body }]);
  });

  it('with --hold and no $USER: "admin"', async () => {
    delete process.env.USER;
    const r = await nodes('--hold', '0', '--reason', 'disk');
    expect(r.code).toBe(0);
    expect(seen.map((s) => s.body)).toEqual([{ node: 0, reason: 'disk', by: 'admin' }]);
  });

  it('kais scale with an empty $USER: "admin" (it sent "" and was refused as a --by never given)', async () => {
    process.env.USER = '';
    const r = await runInProcess(['scale', '--orchestrator', url, '--service', '0', '--replicas', '1', '--reason', 'x']);
    expect(seen.map((s) => s.body?.by)).toEqual(['admin']);
    expect(r.stderr).not.toMatch(/--by/);
  });

  it('--help and docs/cli.md still say what it defaults to', () => {
    expect(optionDocs('nodes', NODES_SPEC)).toContain('| `--by` | text | `$USER, else admin` | who (recorded with --hold and --readmit) |');
  });
});
