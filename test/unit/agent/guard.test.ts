/**
 * The regime guard in the live agent (agent/dispatcher.ts with `guard`): the actor decides while
 * requests can be served in time, the fallback heuristic (no weight version) while none can, and
 * back; counted, reported to onGuardSwitch and on /metrics' counters. And `kais agent`'s guard
 * flags: exit 2 with one line.
 */
import { spawnSync } from 'child_process';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { Dispatcher } from '../../../agent/dispatcher';
import { LocalClusterView } from '../../../agent/local-view';
import type { GuardSwitch, RegimeGuardOptions } from '../../../shared/dispatch/guard';
import type { Request } from '../../../shared/domain';
import { allPlacedView, randomActor, tiny } from '../../support/tiny-agent';

const ROOT = path.resolve(__dirname, '../../..');
const KAIS = path.join(ROOT, 'dist', 'kais.js');

/** A dispatcher on tiny's eAP 0 (every node holds every service) behind `guard`, holding weights v7; its switches and a request maker. */
function guardedDispatcher(guard: RegimeGuardOptions) {
  const view = allPlacedView();
  const d = new Dispatcher({
    scenario: tiny,
    view,
    targets: { nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:1', 'http://127.0.0.1:1'], cloud: 'http://127.0.0.1:1' },
    guard,
  });
  const seen: GuardSwitch[] = [];
  d.onGuardSwitch = (s) => seen.push(s);
  d.setWeights(randomActor(7));
  let id = 0;
  /** A request of service 0 due `deadlineInS` from now (negative: already too late for any target). */
  const req = (deadlineInS: number): Request => {
    const now = view.nowS();
    return { id: id++, service: 0, eap: 0, arrivalS: now, deadlineS: now + deadlineInS, workCoreS: 0.01, inputMB: 0 };
  };
  return { d, seen, req };
}

describe('Dispatcher with the regime guard', () => {
  it('hands decisions to the fallback while no target meets the deadlines, and back to the actor after', () => {
    const { d, seen, req } = guardedDispatcher({ fallback: 'round-robin', enter: 0.5, exit: 0.2, halfLife: 3, minDwell: 4 });
    // all in time: the actor decides
    for (let i = 0; i < 10; i++) expect(d.choose(req(100)).version).toBe(7);
    expect(d.counters.decisionsGuarded).toBe(0);
    // deadlines already past: no target can meet them, the guard takes over
    const late = Array.from({ length: 20 }, () => d.choose(req(-1)));
    expect(seen).toHaveLength(1);
    expect(seen[0]).toMatchObject({ eap: 0, fallback: true });
    expect(late.filter((x) => x.version === null).length).toBe(d.counters.decisionsGuarded);
    expect(d.counters.decisionsGuarded).toBeGreaterThan(10);
    expect(d.guardState?.fallback).toBe(true);
    expect(d.policyName).toBe('round-robin');
    for (const x of late) expect(x.mask[x.target]).toBe(1);
    // in time again: back to the actor
    const after = Array.from({ length: 30 }, () => d.choose(req(100)));
    expect(seen).toHaveLength(2);
    expect(seen[1].fallback).toBe(false);
    expect(after[after.length - 1].version).toBe(7);
    expect(d.counters.guardSwitches).toBe(2);
    expect(d.policyName).toBe('cmmac');
  });

  it('with a middle level: lec decides between mid.enter and enter, round-robin above, the actor below', () => {
    // half-life 1: the late share is 1/2 after one late request, 3/4 after two
    const { d, seen, req } = guardedDispatcher({
      fallback: 'round-robin',
      enter: 0.7,
      exit: 0.6,
      halfLife: 1,
      minDwell: 0,
      mid: { fallback: 'lec', enter: 0.4, exit: 0.1 },
    });
    expect(d.choose(req(100)).version).toBe(7);
    expect(d.choose(req(-1)).version).toBeNull(); // late share 0.5: the middle level
    expect(d.policyName).toBe('lec');
    expect(d.choose(req(-1)).version).toBeNull(); // 0.75: the top level
    expect(d.policyName).toBe('round-robin');
    d.choose(req(100)); // 0.375: down to the middle level (below exit 0.6, above mid.exit 0.1)
    expect(d.policyName).toBe('lec');
    for (let i = 0; i < 3; i++) d.choose(req(100)); // 0.047: back to the actor
    expect(d.policyName).toBe('cmmac');
    expect(seen.map((s) => s.level)).toEqual([1, 2, 1, 0]);
    expect(d.counters.guardSwitches).toBe(4);
  });

  it('with a spreading share: round-robin takes the requests its share draws, the level never switches', () => {
    // half-life 1: the late share is 1/2 after one late request, 3/4 after two; the share is 0 up to 0.2, 1 from 0.6
    const { d, seen, req } = guardedDispatcher({
      fallback: 'lec',
      enter: 1,
      exit: 0.9,
      halfLife: 1,
      minDwell: 0,
      spread: { fallback: 'round-robin', from: 0.2, to: 0.6, max: 1 },
    });
    expect(d.choose(req(100)).version).toBe(7);
    d.choose(req(-1));
    const spread = Array.from({ length: 10 }, () => d.choose(req(-1))); // late share above 0.6: a share of 1
    for (const x of spread) expect(x.version).toBeNull();
    expect(d.guardState).toMatchObject({ fallback: false, level: 0 });
    for (let i = 0; i < 4; i++) d.choose(req(100)); // 0.06: a share of 0, the actor again
    expect(d.choose(req(100)).version).toBe(7);
    expect(seen).toHaveLength(0);
    expect(d.counters.decisionsGuarded).toBeGreaterThanOrEqual(10);
  });

  it('without weights the guard does not count: lec decides as before', () => {
    const view = new LocalClusterView(tiny, 0);
    const d = new Dispatcher({
      scenario: tiny,
      view,
      targets: { nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:1', 'http://127.0.0.1:1'], cloud: 'http://127.0.0.1:1' },
      guard: { fallback: 'round-robin', enter: 0.5, exit: 0.2, halfLife: 3, minDwell: 4 },
    });
    const now = view.nowS();
    for (let i = 0; i < 20; i++) d.choose({ id: i, service: 0, eap: 0, arrivalS: now, deadlineS: now - 1, workCoreS: 0.01, inputMB: 0 });
    expect(d.counters.decisionsGuarded).toBe(0);
    expect(d.counters.decisionsFallback).toBe(20);
    expect(d.policyName).toBe('lec');
  });
});

describe('kais agent guard flags', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-agent-guard-'));
  const targets = path.join(dir, 'targets.json');
  fs.writeFileSync(
    targets,
    JSON.stringify({ nodes: ['http://127.0.0.1:1', 'http://127.0.0.1:2', 'http://127.0.0.1:3'], cloud: 'http://127.0.0.1:4' }),
  );
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  it.each([
    [['--guard', '--guard-enter', '0.3', '--guard-exit', '0.4'], /^kais: --guard-exit: must be below --guard-enter \(0.3\), got 0.4$/],
    [['--guard-enter', '0'], /^kais: --guard-enter: expected a number > 0 and <= 1, got "0"$/],
    [['--guard-fallback', 'cmmac'], /^kais: --guard-fallback: expected one of round-robin, lec, p2c, jsq, got "cmmac"$/],
    [['--guard-mid', 'cmmac'], /^kais: --guard-mid: expected one of none, round-robin, lec, p2c, jsq, got "cmmac"$/],
    [
      [
        '--guard',
        '--guard-enter',
        '0.35',
        '--guard-exit',
        '0.25',
        '--guard-mid',
        'lec',
        '--guard-mid-enter',
        '0.4',
        '--guard-mid-exit',
        '0.1',
      ],
      /^kais: --guard-mid-enter: must be in \(0, --guard-enter=0.35\), got 0.4$/,
    ],
    [
      ['--guard', '--guard-mid', 'lec', '--guard-mid-enter', '0.2', '--guard-mid-exit', '0.3'],
      /^kais: --guard-mid-exit: must be in \[0, --guard-mid-enter=0.2\), got 0.3$/,
    ],
    [
      ['--guard', '--guard-spread', 'round-robin', '--guard-spread-from', '0.5', '--guard-spread-to', '0.4'],
      /^kais: --guard-spread-to: must be in \(--guard-spread-from=0.5, 1\], got 0.4$/,
    ],
    [['--guard-spread', 'cmmac'], /^kais: --guard-spread: expected one of none, round-robin, lec, p2c, jsq, got "cmmac"$/],
  ])('%j exits 2 with one line naming the flag', (extra, pattern) => {
    const r = spawnSync(
      process.execPath,
      [KAIS, 'agent', '--orchestrator', 'ws://127.0.0.1:1', '--eap', '0', '--scenario', 'tiny', '--targets', targets, ...extra],
      { encoding: 'utf8', timeout: 60000 },
    );
    expect(r.status).toBe(2);
    const lines = r.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(pattern);
  });
});
