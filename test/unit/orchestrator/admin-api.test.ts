/**
 * The admin API's answer to a change the store could not keep: 503, the change undone (it would
 * have been lost at the next restart, though answered 200), nothing asked of the cluster; and
 * to one whose placement the store could not keep after the cluster took it (200 with a warning). The API
 * on a real orchestrator: test/integration/admin-api.integration.test.ts.
 */
import { AdminApi } from '../../../orchestrator/admin-api';
import { AdminState } from '../../../orchestrator/admin';
import { loadScenario } from '../../../shared/scenario';

describe('AdminApi', () => {
  it('a change the store cannot keep is 503 and undone; once the store takes it again, it is made', async () => {
    const state = new AdminState();
    state.hold({ node: 1, reason: 'disk', by: 'ann', setMs: 0 });
    let storeOk = false;
    const steps: number[] = [];
    const events: string[] = [];
    const api = new AdminApi({
      scenario: loadScenario('tiny'),
      state,
      save: () => storeOk,
      event: (kind) => events.push(kind),
      stepNow: async () => {
        steps.push(1);
        return { cluster: true, executed: 0, refused: 0 };
      },
      status: () => ({ placementVersion: 3 }),
      events: () => [],
      forecast: () => null,
    });
    const before = state.snapshot();
    for (const [path, body] of [
      ['/v1/scale', { service: 0, replicas: 2, reason: 'launch' }],
      ['/v1/nodes/hold', { node: 0, reason: 'fan' }],
      ['/v1/nodes/readmit', { node: 1, reason: 'fixed' }],
    ] as const) {
      const r = await api.handle('POST', path, new URLSearchParams(), body);
      expect(r.status).toBe(503);
      expect(r.body).toMatchObject({ ok: false, reason: expect.stringMatching(/^not made: the store cannot be written now/) });
      expect(state.snapshot()).toEqual(before);
    }
    expect([steps.length, events]).toEqual([0, []]);
    storeOk = true;
    const r = await api.handle('POST', '/v1/nodes/hold', new URLSearchParams(), { node: 0, reason: 'fan' });
    expect(r.status).toBe(200);
    expect(state.isHeld(0)).toBe(true);
    expect([steps.length, events]).toEqual([1, ['admin-hold']]);
  });

  it('a step that has not ended in time: 202, saved and still being applied (a slow cluster outlasted the CLI)', async () => {
    const state = new AdminState();
    let finish: () => void = () => undefined;
    const api = new AdminApi({
      scenario: loadScenario('tiny'),
      state,
      save: () => true,
      event: () => undefined,
      stepNow: () => new Promise((resolve) => (finish = () => resolve({ cluster: true, executed: 1, refused: 0 }))),
      status: () => ({ placementVersion: 3 }),
      events: () => [],
      forecast: () => null,
      answerWithinMs: 5,
    });
    const r = await api.handle('POST', '/v1/nodes/hold', new URLSearchParams(), { node: 0, reason: 'fan', by: 'ann' });
    expect(r).toEqual({
      status: 202,
      body: { ok: true, pending: true, event: 'admin-hold', message: 'ann: node 0 held out: fan', placementVersion: 3 },
    });
    expect(state.isHeld(0)).toBe(true);
    finish();
  });

  it('a step whose placement the store could not keep (disk full): 200, the cluster took it and the agents were told, with a warning', async () => {
    const api = new AdminApi({
      scenario: loadScenario('tiny'),
      state: new AdminState(),
      save: () => true,
      event: () => undefined,
      stepNow: async () => ({ cluster: true, executed: 1, refused: 0, stored: false }),
      status: () => ({ placementVersion: 4 }),
      events: () => [],
      forecast: () => null,
    });
    const r = await api.handle('POST', '/v1/scale', new URLSearchParams(), { service: 0, replicas: 2, reason: 'launch' });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      ok: true,
      applied: { executed: 1, refused: 0 },
      warning: expect.stringMatching(/^applied and pushed to the agents, but the store could not keep the placement/),
    });
  });
});
