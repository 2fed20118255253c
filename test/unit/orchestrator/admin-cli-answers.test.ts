/**
 * kais status / scale / nodes against a server that is not a well-behaved kais orchestrator: a
 * connection closed mid-answer, JSON of the wrong shape, a redirect, an answer over the cap, a
 * reason with terminal escapes. Each is exit 2 and one line, never a silent success or a stack.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { runInProcess } from '../../support/in-process';

type Mode = (res: http.ServerResponse) => void;

/** GET /v1/status between canaries (no learner, no gate), with `waiting` as the canary's waiting version. */
const betweenCanaries = (waiting: Record<string, unknown> | null) => ({
  placement: [[1]],
  agents: [],
  overrides: [],
  holds: [],
  learner: null,
  gate: null,
  canary: { promoted: 1, rolledBack: 0, superseded: 2, running: null, waiting, goodVersion: 4, recent: [] },
  rejectedVersions: [],
});
const json = (res: http.ServerResponse, status: number, body: unknown) =>
  void res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
const MODES: Record<string, Mode> = {
  // Content-Length promises 1000 bytes; the socket closes after 10
  cut: (res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 1000 });
    res.write('{"ok":true,');
    setImmediate(() => res.socket?.destroy());
  },
  empty: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{}'),
  null: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('null'),
  list: (res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('[1,2]'),
  redirect: (res) => void res.writeHead(302, { location: '/elsewhere' }).end(),
  huge: (res) => {
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1 << 20, 0x20);
    let n = 0;
    const more = () => {
      while (n < 20 && res.write(chunk)) n++;
      if (n < 20) res.once('drain', more);
      else res.end();
    };
    res.write('{"pad":"');
    more();
  },
  // the orchestrator's own refusals, which name a body field or the thing named
  range: (res) => json(res, 400, { reason: 'node: must be an integer in 0..2' }),
  notHeld: (res) => json(res, 404, { reason: 'node 1 is not held' }),
  noOverride: (res) => json(res, 404, { reason: 'service 3 has no override' }),
  // a change saved that the cluster did not take: the answer still carries the status
  unapplied: (res) =>
    json(res, 502, {
      ok: false,
      reason: 'saved, but the cluster did not take it (fetch failed); the next placement step tries again',
      event: 'admin-hold',
      message: 'ann: node 1 held out: disk',
      applied: { executed: 0, refused: 0 },
      placementVersion: 4,
      placement: [[1, 1, 1]],
      agents: [],
      overrides: [],
      holds: [{ node: 1, by: 'ann', reason: 'disk' }],
    }),
  // a status under the actor switch
  status: (res) =>
    json(res, 200, {
      orchestration: 'gpg',
      orchestrationRuns: 'gpg models/kais-gpg.json',
      epoch: 'e1',
      frame: 3,
      weightVersion: 2,
      placementVersion: 4,
      actor: 'light',
      placement: [[1, 1, 1]],
      agents: [],
      overrides: [],
      holds: [],
    }),
  // a status with learning on, the gate, a canary running, and versions rejected
  learning: (res) =>
    json(res, 200, {
      orchestration: 'gpg',
      epoch: 'e1',
      frame: 9,
      weightVersion: 5,
      placementVersion: 7,
      placement: [[1, 1, 1]],
      agents: [],
      overrides: [],
      holds: [],
      learner: { transitionsRead: 6546, updates: 2, published: 1 },
      gate: { passed: 3, rejected: 1, recent: [{ candidate: 6, current: 5, pass: false, reason: 'worse than\u001b[31m v5' }] },
      canary: {
        promoted: 2,
        rolledBack: 1,
        superseded: 0,
        config: { maxWindows: 4 },
        running: {
          version: 5,
          eaps: [0, 1],
          startedMs: Date.UTC(2026, 11, 7, 14, 0, 0),
          windows: 1,
          last: 'undecided: d -0.010',
          perEap: [
            { eap: 0, canary: true, requests: 1000, inDeadline: 520 },
            { eap: 1, canary: true, requests: 0, inDeadline: 0 },
            { eap: 2, canary: false, requests: 2000, inDeadline: 1500 },
          ],
        },
        waiting: null,
        goodVersion: 4,
        recent: [{ version: 4, decision: 'promote', reason: 'not worse than the control' }],
      },
      rejectedVersions: [
        { version: 3, source: 'canary', reason: 'worse than the control' },
        { version: 2, source: 'admin', reason: 'by alice: late share up' },
      ],
    }),
  // the same orchestrator between canaries, learning off and no gate (null): a line for the canary alone
  idle: (res) => json(res, 200, betweenCanaries(null)),
  // between canaries, a learned version waiting for its canary's baseline; `waitingOld`: an orchestrator before session 53 (no waitsFor)
  waiting: (res) =>
    json(
      res,
      200,
      betweenCanaries({
        source: 'learned',
        sinceMs: Date.UTC(2026, 11, 7, 14),
        waitsFor: 'a baseline of 120 s with every eAP on the same version',
      }),
    ),
  waitingOld: (res) => json(res, 200, betweenCanaries({ source: 'learned', sinceMs: 0 })),
  pending: (res) =>
    json(res, 202, {
      ok: true,
      pending: true,
      event: 'admin-scale',
      message: 'ann: service 0 to 2 replica(s) in total: x',
      placementVersion: 5,
    }),
  // another server's refusal of a route the API has (kais node's admin port, say)
  otherRoute: (res) => json(res, 404, { reason: 'no such route (known: /state, /telemetry)' }),
  otherMethod: (res) => json(res, 405, { reason: 'GET only' }),
  escape: (res) =>
    void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ reason: 'bad\u001b[31m red\nline' })),
};

/** One server per mode (the admin paths are absolute: a mode cannot ride in the URL). */
const servers = new Map<string, http.Server>();
const ports = new Map<string, number>();
const token = process.env.KAIS_ADMIN_TOKEN;
beforeAll(async () => {
  process.env.KAIS_ADMIN_TOKEN = 'a-token-long-enough-for-this';
  for (const [name, mode] of Object.entries(MODES)) {
    const server = http.createServer((req, res) => {
      req.resume();
      mode(res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    servers.set(name, server);
    ports.set(name, (server.address() as AddressInfo).port);
  }
});
afterAll(async () => {
  if (token === undefined) delete process.env.KAIS_ADMIN_TOKEN;
  else process.env.KAIS_ADMIN_TOKEN = token;
  for (const server of servers.values()) {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
});

const at = (mode: string) => `http://127.0.0.1:${ports.get(mode)}`;

describe('the admin commands against a server that is not a kais orchestrator', () => {
  it.each([
    ['scale', 'cut', /the connection closed before the whole answer$/],
    ['status', 'cut', /the connection closed before the whole answer$/],
    ['status', 'empty', /answered JSON that is not a kais status$/],
    ['nodes', 'empty', /answered JSON that is not a kais status$/],
    ['scale', 'empty', /answered JSON that is not a kais scale answer$/],
    ['status', 'null', /answered JSON that is not an object/],
    ['status', 'list', /answered JSON that is not an object/],
    ['scale', 'redirect', /answered HTTP 302/],
    ['status', 'huge', /an answer over \d+ bytes/],
    ['scale', 'escape', /^kais: bad\?\[31m red\?line$/],
    [
      'status',
      'otherRoute',
      /^kais: --orchestrator http:\/\/127\.0\.0\.1:\d+: no such route \(known: \/state, \/telemetry\) \(not a kais orchestrator's HTTP port\?\)$/,
    ],
    ['scale', 'otherMethod', /^kais: --orchestrator http:\/\/127\.0\.0\.1:\d+: GET only \(not a kais orchestrator's HTTP port\?\)$/],
  ])('kais %s, %s: exit 2 and one line', async (cmd, mode, line) => {
    const args = cmd === 'scale' ? ['--service', '0', '--replicas', '2', '--reason', 'x'] : [];
    const r = await runInProcess([cmd, '--orchestrator', at(mode), ...args]);
    const lines = r.stderr.trim().split('\n');
    expect({ code: r.code, lines: lines.length }).toEqual({ code: 2, lines: 1 });
    expect(lines[0]).toMatch(line);
    expect(r.stderr).not.toMatch(/internal error|\n\s+at /);
  });
});

describe("the admin commands name the flag of the orchestrator's refusals", () => {
  it.each([
    ['nodes', 'range', ['--hold', '5', '--reason', 'x'], /^kais: --hold: must be an integer in 0\.\.2$/],
    ['nodes', 'range', ['--readmit', '5', '--reason', 'x'], /^kais: --readmit: must be an integer in 0\.\.2$/],
    ['nodes', 'notHeld', ['--readmit', '1', '--reason', 'x'], /^kais: --readmit: node 1 is not held$/],
    ['scale', 'noOverride', ['--service', '3', '--release', '--reason', 'x'], /^kais: --release: service 3 has no override$/],
  ])('kais %s against %s (%j): exit 2, one line', async (cmd, mode, args, line) => {
    const r = await runInProcess([cmd, '--orchestrator', at(mode), ...args]);
    expect({ code: r.code, lines: r.stderr.trim().split('\n') }).toEqual({ code: 2, lines: [expect.stringMatching(line)] });
  });

  it('kais status says which actor the placements name under the actor switch', async () => {
    const r = await runInProcess(['status', '--orchestrator', at('status')]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout.split('\n')[0]).toBe(
      'orchestration gpg models/kais-gpg.json, epoch e1, frame 3, weights v2, placement v4, light actor',
    );
  });

  it('kais status says what the learner, the gate and the canary do, and which versions were rejected', async () => {
    const r = await runInProcess(['status', '--orchestrator', at('learning')]);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines.slice(lines.indexOf('') + 1).filter((l) => !/^(service|\d)/.test(l) && l !== '')).toEqual([
      'learner: 6546 transitions read, 2 updates, 1 version published',
      'gate: 3 passed, 1 rejected; last: v6 rejected: worse than?[31m v5',
      'canary: v5 on eAPs 0, 1 since 2026-12-07T14:00:00.000Z, 1 of 4 windows judged: undecided: d -0.010',
      '  per eAP, in time of requests: canary 0 0.520 of 1000, 1 - of 0; control 2 0.750 of 2000',
      'canary: last verdict: v4 promote: not worse than the control',
      'rejected: v3 (canary): worse than the control',
      'rejected: v2 (admin): by alice: late share up',
    ]);
    const idle = await runInProcess(['status', '--orchestrator', at('idle')]);
    expect(idle.code).toBe(0);
    expect(idle.stdout.trimEnd().split('\n').pop()).toBe('canary: none running (good version v4; 1 promoted, 0 rolled back, 2 superseded)');
    expect(idle.stdout).not.toMatch(/learner|gate|rejected/);
  });

  it('kais status says what a version waiting for its canary waits for (an older orchestrator: the baseline under the main actor)', async () => {
    const lastLine = async (mode: string) => {
      const r = await runInProcess(['status', '--orchestrator', at(mode)]);
      expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
      return r.stdout.trimEnd().split('\n').pop();
    };
    expect(await lastLine('waiting')).toBe(
      'canary: a learned version waits for a baseline of 120 s with every eAP on the same version (since 2026-12-07T14:00:00.000Z)',
    );
    expect(await lastLine('waitingOld')).toBe(
      'canary: a learned version waits for a baseline under the main actor (since 1970-01-01T00:00:00.000Z)',
    );
  });

  it('a change the cluster is still applying (202): exit 0, and the line says so', async () => {
    const r = await runInProcess(['scale', '--orchestrator', at('pending'), '--service', '0', '--replicas', '2', '--reason', 'x']);
    expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
    expect(r.stdout).toBe(
      'ann: service 0 to 2 replica(s) in total: x (placement v5; saved; the cluster is still applying it: see kais status)\n',
    );
  });

  it('a change saved that the cluster did not take: exit 1, one line saying so, and the table as it stands', async () => {
    const r = await runInProcess(['nodes', '--orchestrator', at('unapplied'), '--hold', '1', '--reason', 'disk']);
    expect(r.code).toBe(1);
    expect(r.stderr.trim().split('\n')).toEqual([
      'kais: ann: node 1 held out: disk: saved, but the cluster did not take it (fetch failed); the next placement step tries again',
    ]);
    expect(r.stdout).toMatch(/^ann: node 1 held out: disk\n/);
    expect(r.stdout).toMatch(/by ann: disk/);
  });
});
