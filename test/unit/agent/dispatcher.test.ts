import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { allPlacedView, randomActor, tiny } from '../../support/tiny-agent';
import { Dispatcher } from '../../../agent/dispatcher';
import { LocalClusterView } from '../../../agent/local-view';
import { placementBody } from '../../../shared/protocol/envelope';
import { until } from '../../support/wait';

/** A stub target answering every /serve with `status` after `delayMs`; records the query strings. */
async function stub(status: number, delayMs = 0): Promise<{ url: string; seen: string[]; close: () => Promise<void> }> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(req.url ?? '');
    req.resume();
    setTimeout(() => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(status === 200 ? { procMs: 5, cpu: 0.5, waiting: [0, 0, 0, 0], busy: [1, 0, 0, 0] } : { reason: 'full' }));
    }, delayMs);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    seen,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** `maxInFlight` null: the Dispatcher's default. */
function setup(nodes: string[], cloud: string, maxInFlight: number | null = 256) {
  const view = new LocalClusterView(tiny, 0);
  // service 0 only on node 0
  view.applyPlacement(
    placementBody(1, 0, [
      [1, 0, 0],
      [0, 0, 0],
      [0, 0, 0],
      [0, 0, 0],
    ]),
  );
  const d = new Dispatcher({ scenario: tiny, view, targets: { nodes, cloud }, maxInFlight: maxInFlight ?? undefined });
  return { view, d };
}

describe('Dispatcher', () => {
  const closers: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it('forwards to the chosen node with the work and the time left, and answers 200 with the target', async () => {
    const node = await stub(200);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const { d } = setup([node.url, node.url, node.url], cloud.url);
    const r = await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 1000, workCoreS: 0.1 });
    d.close();
    expect(r).toMatchObject({ status: 200, target: 0, procMs: 5 });
    expect(node.seen[0]).toMatch(/^\/serve\?service=0&work=0\.1&ttl=\d+$/);
    expect(d.counters.inTime).toBe(1);
  });

  it('with the default limits, a burst of 400 requests, 200 of each of two services, goes out at once (none waits in the eAP queue)', async () => {
    // an agent on kais at its default load has up to ~360 requests in flight, ~150 of one service; at
    // the old limits (256 in all, 64 a service) bursts waited in the eAP queue, which the simulator does not model
    let release: () => void = () => {};
    const gate = new Promise<void>((r) => (release = r));
    let seen = 0;
    const server = http.createServer((req, res) => {
      seen++;
      req.resume();
      void gate.then(() => {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ procMs: 5, queuedMs: 0 }));
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    closers.push(
      () =>
        new Promise<void>((r) => {
          server.closeAllConnections();
          server.close(() => r());
        }),
    );
    const { d } = setup([url, url, url], url, null);
    const answers = Array.from({ length: 400 }, (_, i) => d.submit({ service: i % 2, deadlineMs: 10_000, payloadBytes: 0 }));
    expect(d.queued).toBe(0);
    expect(d.outstanding).toBe(400);
    // every one reaches the target before any answer comes back (no socket pool limit below it either)
    await until(() => seen === 400, 'the target to see all 400 requests', 10_000);
    release();
    const rs = await Promise.all(answers);
    d.close();
    expect(rs.every((r) => r.status === 200)).toBe(true);
  });

  it('does not retry a request the node refused as expired (504): no time is left', async () => {
    const node = await stub(504);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const { d } = setup([node.url, node.url, node.url], cloud.url);
    const r = await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 });
    d.close();
    expect(r).toMatchObject({ status: 504, target: 0 });
    expect(d.counters.retriedOnCloud).toBe(0);
    expect(cloud.seen).toHaveLength(0);
  });

  it.each([
    [503, 'full'],
    [500, 'failing: a 500 answered every request while the cloud sat idle'],
  ])('retries once on the cloud when the edge node answers %s (%s), and counts it against the node', async (status) => {
    const node = await stub(status);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const { d, view } = setup([node.url, node.url, node.url], cloud.url);
    const r = await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 });
    d.close();
    expect(r).toMatchObject({ status: 200, target: view.cloudTarget });
    expect(d.counters.retriedOnCloud).toBe(1);
    expect(node.seen).toHaveLength(1);
    expect(cloud.seen).toHaveLength(1);
    // no load report with the refusal: QoS isolation counts it as the node's failure
    expect(d.takeNodeOutcomes()).toEqual([{ node: 0, served: 0, failed: 1 }]);
  });

  it('sends to the cloud, and keeps the node out of the mask, when the node cannot be reached', async () => {
    const cloud = await stub(200);
    closers.push(cloud.close);
    const { d, view } = setup(['http://127.0.0.1:1', 'http://127.0.0.1:1', 'http://127.0.0.1:1'], cloud.url);
    const r = await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 });
    expect(r).toMatchObject({ status: 200, target: view.cloudTarget });
    expect(view.healthy(0)).toBe(false);
    const again = await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 });
    d.close();
    expect(again.target).toBe(view.cloudTarget);
    expect(d.counters.retriedOnCloud).toBe(1);
  });

  it('answers 504 expired for a request whose deadline passed while it waited in the eAP queue', async () => {
    const node = await stub(200, 150);
    const cloud = await stub(200, 150);
    closers.push(node.close, cloud.close);
    const { d } = setup([node.url, node.url, node.url], cloud.url, 1);
    const first = d.submit({ service: 0, deadlineMs: 5000, payloadBytes: 0 });
    const second = d.submit({ service: 0, deadlineMs: 20, payloadBytes: 0 });
    const [a, b] = await Promise.all([first, second]);
    d.close();
    expect(a.status).toBe(200);
    expect(b).toMatchObject({ status: 504, target: -1, reason: 'expired in the eAP queue' });
    expect(d.outstanding).toBe(0);
  });

  it('records one transition per decision with --experience all, with the fallback log-probability 0, and bounds the buffer', async () => {
    const node = await stub(200);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const view = new LocalClusterView(tiny, 0);
    const d = new Dispatcher({
      scenario: tiny,
      view,
      targets: { nodes: [node.url, node.url, node.url], cloud: cloud.url },
      experienceCapacity: 3,
      experience: 'all',
    });
    await Promise.all(Array.from({ length: 5 }, () => d.submit({ service: 1, deadlineMs: 2000, payloadBytes: 0 })));
    d.close();
    const t = d.takeExperience();
    expect(t).toHaveLength(3);
    expect(d.counters.experienceDropped).toBe(2);
    expect(t[0]).toMatchObject({ eap: 0, service: 1, logProb: 0, weightVersion: null, done: false });
    expect(t[0].mask[view.cloudTarget]).toBe(1);
    expect(t[0].mask[t[0].action]).toBe(1);
  });

  it.each([0, 1, 0.5])('records the log-probability of what the actor did (--explore %s)', async (explore) => {
    const node = await stub(200);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const view = allPlacedView();
    const d = new Dispatcher({
      scenario: tiny,
      view,
      targets: { nodes: [node.url, node.url, node.url], cloud: cloud.url },
      explore,
      experience: 'all',
    });
    d.setWeights(randomActor(7));
    await Promise.all(Array.from({ length: 20 }, () => d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 })));
    d.close();
    const t = d.takeExperience();
    expect(t).toHaveLength(20);
    for (const x of t) expect(x.weightVersion).toBe(7);
    // argmax is deterministic (probability 1); a drawn decision records log pi(a|o) < 0 (4 valid targets)
    const drawn = t.filter((x) => x.logProb < 0).length;
    for (const x of t) expect(x.logProb).toBeLessThanOrEqual(0);
    if (explore === 0) expect(drawn).toBe(0);
    else if (explore === 1) expect(drawn).toBe(20);
    else {
      expect(drawn).toBeGreaterThan(3);
      expect(drawn).toBeLessThan(17);
    }
  });

  it("retires the experience of an old store's weights: what it holds, what is in flight, and what it decides before the next weights (a new epoch)", async () => {
    const node = await stub(200, 60);
    const cloud = await stub(200, 60);
    closers.push(node.close, cloud.close);
    const d = new Dispatcher({
      scenario: tiny,
      view: allPlacedView(),
      targets: { nodes: [node.url, node.url, node.url], cloud: cloud.url },
      experience: 'all',
    });
    d.setWeights(randomActor(5));
    await Promise.all(Array.from({ length: 4 }, () => d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 })));
    const inFlight = Array.from({ length: 3 }, () => d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 }));
    expect(d.retireExperience()).toBe(4); // the held ones
    await Promise.all(inFlight); // decided on v5, answered after the change: not kept
    await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 }); // still v5: not kept
    expect(d.takeExperience()).toEqual([]);
    d.setWeights(randomActor(1, 4)); // the new store's v1
    await Promise.all(Array.from({ length: 2 }, () => d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 })));
    d.close();
    expect(d.takeExperience().map((t) => t.weightVersion)).toEqual([1, 1]);
    expect(d.counters.experienceRetired).toBe(8);
  });

  it.each([
    ['explored', 0.5],
    ['explored', 0],
    ['none', 1],
  ] as const)('with --experience %s (explore %s) keeps exactly the drawn decisions, or none', async (experience, explore) => {
    const node = await stub(200);
    const cloud = await stub(200);
    closers.push(node.close, cloud.close);
    const view = allPlacedView();
    const targets = { nodes: [node.url, node.url, node.url], cloud: cloud.url };
    const d = new Dispatcher({ scenario: tiny, view, targets, explore, ...(experience === 'explored' ? {} : { experience }) });
    // before weights: lec fallback decisions, deterministic, never kept in these modes
    await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 });
    const actor = randomActor(2);
    d.setWeights(actor);
    await Promise.all(Array.from({ length: 40 }, () => d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 })));
    d.close();
    const t = d.takeExperience();
    expect(d.counters.decisionsLearned).toBe(40);
    // drawn decisions are counted whether kept or not: none at explore 0, all 40 at explore 1, the kept ones otherwise
    expect(d.counters.decisionsDrawn).toBe(explore === 0 ? 0 : explore === 1 ? 40 : t.length);
    if (experience === 'none' || explore === 0) {
      expect(t).toHaveLength(0);
    } else {
      // about half drawn; every kept one is drawn (log-probability < 0 with 4 valid targets) and has its observation
      expect(t.length).toBeGreaterThan(8);
      expect(t.length).toBeLessThan(32);
      for (const x of t) {
        expect(x.logProb).toBeLessThan(0);
        expect(x.weightVersion).toBe(2);
        expect(x.obs.length).toBe(actor.shapes[0][0]);
      }
    }
  });

  it('counts node failures for QoS isolation, not admission control or placement refusals', async () => {
    const bodies: Record<string, unknown>[] = [
      { reason: 'full', waiting: [3, 0, 0, 0], busy: [1, 0, 0, 0] }, // busy: the node works as designed
      { reason: 'no replica of service 0' }, // placement
      { reason: 'node failed' }, // a failure
    ];
    const servers = await Promise.all(
      bodies.map(
        (b) =>
          new Promise<{ url: string; close: () => void }>((resolve) => {
            const server = http.createServer((req, res) => {
              req.resume();
              res.writeHead(503, { 'content-type': 'application/json' });
              res.end(JSON.stringify(b));
            });
            server.listen(0, '127.0.0.1', () =>
              resolve({
                url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
                close: () => (server.closeAllConnections(), server.close()),
              }),
            );
          }),
      ),
    );
    const cloud = await stub(200);
    closers.push(cloud.close, async () => servers.forEach((x) => x.close()));
    // every node of a dispatcher answers the same way; count what QoS isolation would see
    const totals = [];
    for (const server of servers) {
      const view = allPlacedView();
      const d = new Dispatcher({ scenario: tiny, view, targets: { nodes: [server.url, server.url, server.url], cloud: cloud.url } });
      for (let k = 0; k < 6; k++) expect((await d.submit({ service: 0, deadlineMs: 2000, payloadBytes: 0 })).status).toBe(200); // retried on the cloud
      d.close();
      const out = d.takeNodeOutcomes();
      expect(out.some((x) => x.node === view.cloudTarget)).toBe(false); // the cloud is never isolated
      expect(d.takeNodeOutcomes()).toEqual([]); // taken once
      totals.push(out.reduce((a, x) => ({ served: a.served + x.served, failed: a.failed + x.failed }), { served: 0, failed: 0 }));
    }
    expect(totals[0]).toEqual({ served: 0, failed: 0 }); // full
    expect(totals[1]).toEqual({ served: 0, failed: 0 }); // no replica
    expect(totals[2].served).toBe(0); // node failed
    expect(totals[2].failed).toBeGreaterThanOrEqual(6);
  });

  it('refuses an unknown experience mode', () => {
    const view = new LocalClusterView(tiny, 0);
    expect(
      () =>
        new Dispatcher({
          scenario: tiny,
          view,
          targets: { nodes: ['http://x', 'http://x', 'http://x'], cloud: 'http://x' },
          experience: 'some' as never,
        }),
    ).toThrow(/experience must be one of/);
  });

  it('refuses weights that do not fit the scenario actor', () => {
    const { d } = setup(['http://x', 'http://x', 'http://x'], 'http://x');
    expect(() =>
      d.setWeights({ version: 1, checksum: 0, shapes: [[3, 2], [2]], tensors: [new Float32Array(6), new Float32Array(2)] }),
    ).toThrow(/actor weights do not fit/);
    expect(d.weightVersion).toBeNull();
  });
});
