/**
 * Refused hellos are events any peer can provoke without a token: a flood of them must not grow the
 * event store and the log without limit. On a live orchestrator (startOrchestrator: real hub on
 * loopback, real SQLite file), bursts of wrong-token, unknown-eAP and duplicate hellos from one
 * address are each refused as before (closed 4001 / 4009), counted one by one in
 * kais_orchestrator_events_total, but stored and logged (at level warn) once a minute per kind
 * and address; the next one after the minute carries how many were left out.
 *
 * No sleeps: every wait is on a close or a condition polled against a deadline; the minute passes
 * by moving Date.now.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import WebSocket from 'ws';
import { readConfig, startOrchestrator, type RunningOrchestrator } from '../../../orchestrator/main';
import { levelOf } from '../../../shared/log';
import { Codec } from '../../../shared/protocol/codec';
import { makeFrame, type Frame, type HelloBody } from '../../../shared/protocol/envelope';
import { httpGet, until } from '../../support/wait';

const codec = new Codec();
const sockets: WebSocket[] = [];
let dir: string;
let o: RunningOrchestrator | null = null;

beforeEach(() => (dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-refusals-'))));
afterEach(async () => {
  jest.restoreAllMocks();
  sockets.splice(0).forEach((w) => w.terminate());
  await o?.close();
  o = null;
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Opens a socket and says hello; resolves with the first frame back and a promise of the close code. */
async function hello(url: string, body: Partial<HelloBody>): Promise<{ ws: WebSocket; code: Promise<number>; first: Frame }> {
  const ws = new WebSocket(url, { perMessageDeflate: false });
  sockets.push(ws);
  ws.on('error', () => undefined);
  const code = new Promise<number>((resolve) => ws.once('close', (c) => resolve(c)));
  const first = new Promise<Frame>((resolve, reject) =>
    ws.once('message', (d: Buffer) => {
      const r = codec.decode(d);
      if (r.ok) resolve(r.frame);
      else reject(new Error('undecodable first frame'));
    }),
  );
  await new Promise<void>((resolve) => ws.once('open', () => resolve()));
  const h = { eapId: 0, token: '', agentVersion: 't', weightVersion: null, placementVersion: null, ...body } as HelloBody;
  ws.send(codec.encode(makeFrame('hello', 0, h)));
  return { ws, code, first: await first };
}

/** `n` hellos at once; resolves with their close codes. */
async function burst(url: string, n: number, body: Partial<HelloBody>): Promise<number[]> {
  const all = await Promise.all(Array.from({ length: n }, () => hello(url, body)));
  return Promise.all(all.map((c) => c.code));
}

describe('refused hellos: one event a minute per kind and address', () => {
  it('stores and logs a flood of wrong-token, unknown-eAP and duplicate hellos once, as warnings, with the count carried', async () => {
    const cfgFile = path.join(dir, 'c.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ scenario: 'small', learner: 'none', detector: 'none', token: 'right', heartbeatMs: 1000 }));
    const logs: string[] = [];
    o = await startOrchestrator(readConfig(cfgFile), { dbPath: path.join(dir, 'o.db'), log: (l) => logs.push(l), httpPort: 0 });
    const url = o.hub.url;
    const events = (kind: string) => o!.store.events().filter((e) => e.kind === kind);
    const lines = (kind: string) => logs.filter((l) => l.startsWith(`event ${kind} `));
    const N = 50;

    // ---- wrong token: every one refused (4001), one event ----
    expect(await burst(url, N, { eapId: 0, token: 'wrong' })).toEqual(Array(N).fill(4001));
    await until(() => o!.hub.stats.authFailures === N, `${N} auth failures`, 10_000);
    expect(events('auth')).toHaveLength(1);
    expect(events('auth')[0]).toMatchObject({ eap: 0, message: 'hello refused: wrong token for eAP 0' });
    expect(lines('auth')).toHaveLength(1);
    expect(levelOf(lines('auth')[0])).toBe('warn');

    // ---- an eAP outside the cluster: the same ----
    expect(await burst(url, N, { eapId: 999, token: 'right' })).toEqual(Array(N).fill(4001));
    await until(() => o!.hub.stats.authFailures === 2 * N, `${N} more auth failures`, 10_000);
    expect(events('unknown-eap')).toHaveLength(1);
    expect(events('unknown-eap')[0].message).toMatch(/^hello refused: eAP 999 is not in this cluster/);
    expect(lines('unknown-eap')).toHaveLength(1);
    expect(levelOf(lines('unknown-eap')[0])).toBe('warn');

    // ---- another instance's hello for an eAP with a live session: refused (4009), one event ----
    const live = await hello(url, { eapId: 1, token: 'right', instance: 'real' });
    expect(live.first.type).toBe('welcome');
    expect(await burst(url, N, { eapId: 1, token: 'right', instance: 'other' })).toEqual(Array(N).fill(4009));
    await until(() => o!.hub.stats.duplicateHellos === N, `${N} duplicate hellos`, 10_000);
    expect(events('duplicate-hello')).toHaveLength(1);
    expect(events('duplicate-hello')[0].message).toMatch(/^hello refused: eAP 1 already has a live session/);
    expect(lines('duplicate-hello')).toHaveLength(1);
    expect(levelOf(lines('duplicate-hello')[0])).toBe('warn');
    expect(live.ws.readyState).toBe(WebSocket.OPEN);

    // every refusal is still counted in the metrics
    const metrics = (await httpGet(o.httpPort!, '/metrics')).text;
    expect(metrics).toContain(`kais_orchestrator_events_total{kind="auth"} ${N}`);
    expect(metrics).toContain(`kais_orchestrator_events_total{kind="unknown-eap"} ${N}`);
    expect(metrics).toContain(`kais_orchestrator_events_total{kind="duplicate-hello"} ${N}`);

    // ---- a minute later: the next one is an event again, with how many were left out ----
    const realNow = Date.now.bind(Date);
    jest.spyOn(Date, 'now').mockImplementation(() => realNow() + 61_000);
    expect(await burst(url, 1, { eapId: 1, token: 'wrong' })).toEqual([4001]);
    await until(() => events('auth').length === 2, 'the next auth event', 10_000);
    const next = events('auth')[1];
    expect(next.message).toBe(`hello refused: wrong token for eAP 1 (and ${N - 1} more from 127.0.0.1 since the previous one)`);
    expect(lines('auth')).toHaveLength(2);
    expect(lines('auth')[1]).toContain(`(and ${N - 1} more from 127.0.0.1 since the previous one)`);
    expect(levelOf(lines('auth')[1])).toBe('warn');
  });
});
