/**
 * Refused hellos are events any peer can provoke without a token: a flood of them must not grow the
 * event store and the log without limit. On a live orchestrator (startOrchestrator: real hub on
 * loopback, real SQLite file), bursts of wrong-token, unknown-eAP and duplicate hellos from one
 * address are each refused as before (closed 4001 / 4009), counted one by one in
 * kais_orchestrator_events_total, but stored and logged (at level warn) once a minute per kind
 * and address; the next one after the minute carries how many were left out. A minute in which
 * some were left out ends with one closing event counting them (not counted again in the metric),
 * and the address is forgotten then (the map of open windows also holds at most
 * `refusalAddresses` addresses; further ones share one entry, "other addresses").
 *
 * No sleeps: every wait is on a close or a condition polled against a deadline; the minute passes
 * by moving Date.now (the second test also shortens it to 200 ms with `refusalWindowMs`, and holds
 * Date.now still while a burst arrives, so the burst falls in one window however slow the machine).
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

/** Opens a socket (from `localAddress` when given) and says hello; resolves with the first frame back and a promise of the close code. */
async function hello(
  url: string,
  body: Partial<HelloBody>,
  localAddress?: string,
): Promise<{ ws: WebSocket; code: Promise<number>; first: Frame }> {
  const ws = new WebSocket(url, { perMessageDeflate: false, ...(localAddress ? { localAddress } : {}) });
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
async function burst(url: string, n: number, body: Partial<HelloBody>, localAddress?: string): Promise<number[]> {
  const all = await Promise.all(Array.from({ length: n }, () => hello(url, body, localAddress)));
  return Promise.all(all.map((c) => c.code));
}

/** until() with its deadline on performance.now: Date.now is held still by the test below. */
async function settle(cond: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = performance.now() + ms;
  while (!cond()) {
    if (performance.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
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

  it('ends a window in which refusals were left out with one closing event counting them, then forgets the address', async () => {
    const cfgFile = path.join(dir, 'c.json');
    fs.writeFileSync(cfgFile, JSON.stringify({ scenario: 'small', learner: 'none', detector: 'none', token: 'right', heartbeatMs: 1000 }));
    const logs: string[] = [];
    // a 200 ms window instead of a minute, and room for one address (the rest share "other addresses")
    const W = 200;
    o = await startOrchestrator(readConfig(cfgFile), {
      dbPath: path.join(dir, 'o.db'),
      log: (l) => logs.push(l),
      httpPort: 0,
      refusalWindowMs: W,
      refusalAddresses: 1,
    });
    const url = o.hub.url;
    const events = (kind: string) => o!.store.events().filter((e) => e.kind === kind);
    const lines = (kind: string) => logs.filter((l) => l.startsWith(`event ${kind} `) || l.startsWith(`event ${kind}: `));
    const N = 30;
    // the orchestrator's clock is held still while a burst arrives (every refusal falls in the first
    // one's window however slow the machine), then moved past the window's end
    let clock = Date.now();
    jest.spyOn(Date, 'now').mockImplementation(() => clock);

    // ---- a burst of wrong-token hellos: one event; the window stays open while the clock is held ----
    expect(await burst(url, N, { eapId: 0, token: 'wrong' })).toEqual(Array(N).fill(4001));
    await settle(() => o!.hub.stats.authFailures === N, `${N} auth failures`);
    expect(events('auth')).toHaveLength(1);
    expect(lines('auth')).toHaveLength(1);

    // ---- the window ends: one closing event with the N - 1 left out, at warn ----
    clock += W;
    await settle(() => events('auth').length === 2, 'the closing auth event');
    const closing = events('auth')[1];
    expect(closing).toMatchObject({
      eap: null,
      message: `${N - 1} more refused from 127.0.0.1 within 0.2 s of the previous auth event (counted, not logged one by one); none since`,
    });
    await settle(() => lines('auth').length === 2, 'the closing auth line');
    expect(lines('auth')[1]).toContain(`${N - 1} more refused from 127.0.0.1`);
    expect(levelOf(lines('auth')[1])).toBe('warn');
    expect((await httpGet(o.httpPort!, '/metrics')).text).toContain(`kais_orchestrator_events_total{kind="auth"} ${N}`);

    // ---- the address was forgotten: its next refusal is an event again, carrying no count ----
    expect(await burst(url, 1, { eapId: 0, token: 'wrong' })).toEqual([4001]);
    await settle(() => events('auth').length === 3, 'a fresh auth event');
    expect(events('auth')[2].message).toBe('hello refused: wrong token for eAP 0');

    // ---- further addresses while 127.0.0.1's window is open share one entry: no map entry of their own ----
    expect(await burst(url, 1, { eapId: 0, token: 'wrong' }, '127.0.0.2')).toEqual([4001]);
    await settle(() => events('auth').length === 4, 'the first refusal from another address');
    expect(events('auth')[3].message).toBe('hello refused: wrong token for eAP 0');
    expect(await burst(url, 3, { eapId: 0, token: 'wrong' }, '127.0.0.2')).toEqual(Array(3).fill(4001));
    expect(await burst(url, 2, { eapId: 0, token: 'wrong' }, '127.0.0.3')).toEqual(Array(2).fill(4001));
    await settle(() => o!.hub.stats.authFailures === N + 7, 'every refusal counted');
    expect(events('auth')).toHaveLength(4);
    // both windows end: 127.0.0.1's left nothing out (no event), the shared one left out 5
    clock += W;
    await settle(() => events('auth').length === 5, 'the closing event of the other addresses');
    expect(events('auth')[4].message).toBe(
      '5 more refused from other addresses within 0.2 s of the previous auth event (counted, not logged one by one); none since',
    );
    expect((await httpGet(o.httpPort!, '/metrics')).text).toContain(`kais_orchestrator_events_total{kind="auth"} ${N + 7}`);
  });
});
