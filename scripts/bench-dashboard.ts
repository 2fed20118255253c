/**
 * What serving the dashboard and the admin API costs the orchestrator's fan-out (issue 18), for
 * `npm run bench` (loaded by scripts/bench.ts):
 *
 *   dashboard.fanoutMs.p99.200.without   publish -> all 200 agents decoded the weights, no viewer
 *   dashboard.fanoutMs.p99.200.with      the same with a dashboard viewer connected: the stream
 *                                        (/dashboard/stream, a 200-agent snapshot a second) and
 *                                        GET /v1/status every second
 *   dashboard.fanoutP99Ratio.200         with / without (the bar: at most 1.05)
 *   dashboard.flushedMs.p99.200.without|with   the orchestrator's side of it: publish -> the last socket
 *                                        took the frame (the hub's `flushed` event), without the clients' decode
 *   dashboard.orchestratorCpuMsPerS.200.without|with   the orchestrator process's CPU ms per wall second
 *                                        over those phases (less noisy than a p99 on a shared machine)
 *   dashboard.snapshotMs.p99.200         building one snapshot (JSON) with 200 agents and 40 nodes
 *   dashboard.snapshotKB.200             its size
 *   dashboard.browser.*                  with Debian's chromium (/usr/bin/chromium) present: the page
 *                                        over the same stream, 200 agent chips and 40 node cards:
 *                                        DOM elements and the slowest render of a snapshot
 *
 * The runs alternate (without, with, without, ...: ROUNDS rounds of PUBLISHES publishes each), so
 * a drift of the machine's load falls on both. Processes: the orchestrator side (store, hub,
 * registry, the HTTP server with the dashboard and the admin API, as orchestrator/main.ts wires
 * them) in a child (`--orchestrator-child`), the 200 agents in two children of bench-hub.js
 * (`--clients-child`: hello + decode every frame), the viewer in a child (`--viewer-child`).
 * The orchestrator's CPU, not the viewer's, is what is measured: the viewer is a Node process that
 * reads the stream as the page does (the browser's own cost is measured apart, after the runs).
 *
 * `node dist/scripts/bench-dashboard.js` runs it alone (KAIS_BENCH_DASHBOARD_ROUNDS, default 3).
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { round } from '../shared/round';
import type { BenchResult } from './bench';
import { JsonChild, quantile, shippedWeights } from './bench-hub';

const TOKEN = 'bench-token'; // bench-hub's clients say hello with it
const ADMIN_TOKEN = 'bench-admin-token-0123456789';
const AGENTS = 200;
const PUBLISHES = 20;
const ROUNDS = Number(process.env.KAIS_BENCH_DASHBOARD_ROUNDS) || 3;
const CHROMIUM = '/usr/bin/chromium';

/** The orchestrator side: hub + registry + the HTTP server with the dashboard and the admin API. */
async function orchestratorChild(dbFile: string): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { Store } = require('../orchestrator/store') as typeof import('../orchestrator/store');
  const { ModelRegistry, startHub } = require('../orchestrator/registry') as typeof import('../orchestrator/registry');
  const { OrchestratorHttp } = require('../orchestrator/http') as typeof import('../orchestrator/http');
  const { DashboardFeed } = require('../orchestrator/dashboard') as typeof import('../orchestrator/dashboard');
  const { AdminApi } = require('../orchestrator/admin-api') as typeof import('../orchestrator/admin-api');
  const { AdminState } = require('../orchestrator/admin') as typeof import('../orchestrator/admin');
  const { loadScenario } = require('../shared/scenario') as typeof import('../shared/scenario');
  const { initialPlacement } = require('../shared/orchestration/placement') as typeof import('../shared/orchestration/placement');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const scenario = loadScenario('kais');
  const store = Store.open(dbFile);
  const hub = await startHub(store, { token: TOKEN });
  const registry = new ModelRegistry(store, hub);
  const placement = initialPlacement(scenario);
  registry.publishPlacement(0, placement);
  const weights = shippedWeights();
  const admin = new AdminState();
  const sessions = () =>
    hub
      .sessions()
      .map((s) => ({ eap: s.eapId, session: s.sessionId, weightVersion: s.weightVersion, placementVersion: s.placementVersion }));
  const feed = new DashboardFeed({
    scenario,
    speed: 1,
    orchestration: 'static',
    sessions,
    placementVersion: () => registry.placementVersion,
    weightVersion: () => registry.weightVersion,
    placement: () => placement.map((r) => r.slice()),
    frame: () => 0,
    holds: () => admin.snapshot().holds,
    overrides: () => admin.snapshot().overrides,
    forecast: () => null,
    learner: () => null,
    // the safe-learning panel's read, as main.ts wires it (the newest rejected versions from the store)
    safeLearning: () => ({ learner: null, gate: null, canary: null, rejectedVersions: store.rejectedModels().slice(0, 20) }),
  });
  const status = () => ({
    agents: sessions(),
    weightVersion: registry.weightVersion,
    placementVersion: registry.placementVersion,
    placement,
    ...admin.snapshot(),
  });
  const api = new AdminApi({
    scenario,
    state: admin,
    save: () => undefined,
    event: (kind, message) => feed.event({ tsMs: Date.now(), kind, eap: null, message }),
    stepNow: async () => ({ cluster: true, executed: 0, refused: 0 }),
    status,
    events: (q) => store.events(q),
    forecast: () => null,
  });
  const zero = () => 0;
  const web = new OrchestratorHttp(
    {
      agentsConnected: () => hub.sessions().length,
      weightVersion: () => registry.weightVersion,
      placementVersion: () => registry.placementVersion,
      eventTotals: () => ({}),
      intake: () => ({ accepted: 0, invalid: 0, rateLimited: 0, quarantined: 0 }),
      learner: () => null,
      placementOrders: () => ({ executed: 0, refused: 0, deferredSteps: 0, failedSteps: 0 }),
      storeWriteFailures: zero,
      notReady: () => null,
      health: () => ({}),
    },
    { api, token: ADMIN_TOKEN },
    feed,
  );
  const httpPort = await web.listen(0);
  const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const stop = async () => {
    await web.close();
    registry.dispose();
    await hub.close();
    store.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.stdin.once('end', () => void stop());
  // the orchestrator's side of each fan-out: publish -> the last session's socket took the frame
  const flushes = new Map<number, { t0: number; want: number; got: number; ms: number | null; waiter: (() => void) | null }>();
  hub.on('flushed', (_s, kind, version) => {
    const f = flushes.get(version);
    if (kind !== 'weights' || !f) return;
    if (++f.got === f.want) {
      f.ms = performance.timeOrigin + performance.now() - f.t0;
      f.waiter?.();
    }
  });
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const cmd = JSON.parse(line) as { cmd: string; version?: number };
    if (cmd.cmd === 'publish') {
      const t0 = performance.timeOrigin + performance.now();
      flushes.set((store.latestModelVersion() ?? 0) + 1, { t0, want: hub.sessions().length, got: 0, ms: null, waiter: null });
      const body = registry.publishWeights(weights);
      out({ version: body.version, t0 });
    } else if (cmd.cmd === 'flushed') {
      const f = flushes.get(cmd.version!);
      const reply = () => out({ flushedMs: f?.ms ?? null });
      if (!f || f.ms !== null) reply();
      else f.waiter = reply;
    } else if (cmd.cmd === 'cpu') {
      const u = process.cpuUsage();
      out({ cpuMs: (u.user + u.system) / 1000, wallMs: performance.now() });
    } else if (cmd.cmd === 'snapshot') {
      // the cost of one snapshot with the sessions connected now
      const ms: number[] = [];
      let bytes = 0;
      for (let i = 0; i < 50; i++) {
        const t0 = performance.now();
        bytes = feed.snapshotText().length;
        ms.push(performance.now() - t0);
      }
      out({
        p99: quantile(ms, 0.99),
        p50: quantile(ms, 0.5),
        bytes,
        sessions: hub.sessions().length,
        viewers: feed.viewers,
        sent: feed.sent,
      });
    }
  });
  out({ ready: true, port: hub.port, httpPort });
}

/** The viewer: the stream as the page reads it (every snapshot parsed) and GET /v1/status every second. */
function viewerChild(httpPort: number): void {
  let req: http.ClientRequest | null = null;
  let poll: NodeJS.Timeout | null = null;
  let snapshots = 0;
  let statusCalls = 0;
  const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const headers = { authorization: `Bearer ${ADMIN_TOKEN}` };
  process.stdin.once('end', () => process.exit(0));
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const cmd = JSON.parse(line) as { cmd: string };
    if (cmd.cmd === 'connect') {
      let first = true;
      req = http.get({ host: '127.0.0.1', port: httpPort, path: '/dashboard/stream', headers }, (res) => {
        if (res.statusCode !== 200) throw new Error(`viewer: the stream answered ${res.statusCode}`);
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          buf += c;
          let cut: number;
          while ((cut = buf.indexOf('\n\n')) >= 0) {
            const msg = buf.slice(0, cut);
            buf = buf.slice(cut + 2);
            const data = msg.split('\n').find((l) => l.startsWith('data: '));
            if (!data) continue;
            const snap = JSON.parse(data.slice(6)) as { agents: unknown[] };
            snapshots++;
            if (first) {
              first = false;
              out({ connected: true, agents: snap.agents.length });
            }
          }
        });
      });
      req.on('error', () => undefined);
      poll = setInterval(() => {
        http.get({ host: '127.0.0.1', port: httpPort, path: '/v1/status', headers }, (res) => {
          res.resume();
          res.on('end', () => statusCalls++);
        });
      }, 1000);
    } else if (cmd.cmd === 'disconnect') {
      req?.destroy();
      req = null;
      if (poll) clearInterval(poll);
      out({ snapshots, statusCalls });
    }
  });
  out({ ready: true });
}

/** The page in Debian's chromium over the same stream: DOM size and the slowest render with 200 agents. */
async function browserCheck(httpPort: number): Promise<BenchResult[]> {
  if (!fs.existsSync(CHROMIUM)) return [];
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { chromium } = require('playwright-core') as typeof import('playwright-core');
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-background-networking'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1500, height: 1300 } });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await page.goto(`http://127.0.0.1:${httpPort}/dashboard#token=${ADMIN_TOKEN}`);
    // the page's globals (this file is compiled without the DOM's types; the page's CSP forbids string predicates)
    type Page = {
      document: { querySelectorAll(s: string): { length: number }; getElementsByTagName(s: string): { length: number } };
      kaisDashboard?: { snapshots: number; maxRenderMs: number };
    };
    await page.waitForFunction(
      (n) => (globalThis as unknown as Page).document.querySelectorAll('.agent[data-connected="true"]').length === n,
      AGENTS,
      { timeout: 20_000 },
    );
    const start = await page.evaluate(() => (globalThis as unknown as Page).kaisDashboard?.snapshots ?? 0);
    await page.waitForFunction((s) => ((globalThis as unknown as Page).kaisDashboard?.snapshots ?? 0) >= s + 10, start, {
      timeout: 30_000,
    }); // ten more rendered
    const m = await page.evaluate(() => {
      const g = globalThis as unknown as Page;
      return {
        dom: g.document.getElementsByTagName('*').length,
        nodes: g.document.querySelectorAll('[data-node]').length,
        maxRenderMs: g.kaisDashboard?.maxRenderMs ?? NaN,
      };
    });
    if (errors.length > 0) throw new Error(`bench-dashboard: the page logged errors: ${errors.join(' | ')}`);
    return [
      {
        name: 'dashboard.browser.domElements.200',
        value: m.dom,
        unit: `elements (200 agent chips, ${m.nodes} node cards, tables, charts)`,
      },
      {
        name: 'dashboard.browser.maxRenderMs.200',
        value: round(m.maxRenderMs, 1),
        unit: 'ms (slowest render of a snapshot in chromium, first included)',
      },
    ];
  } finally {
    await browser.close();
  }
}

export async function benchDashboard(): Promise<BenchResult[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-bench-dashboard-'));
  const orch = new JsonChild([__filename, '--orchestrator-child', path.join(dir, 'orchestrator.db')], 'bench orchestrator');
  const clients = [0, 1].map(() => null as JsonChild | null);
  let viewer: JsonChild | null = null;
  try {
    const { port, httpPort } = (await orch.ready) as { port: number; httpPort: number };
    for (let k = 0; k < clients.length; k++) {
      clients[k] = new JsonChild([path.join(__dirname, 'bench-hub.js'), '--clients-child', String(port)], 'bench clients');
      await clients[k]!.ready;
    }
    const cs = clients as JsonChild[];
    await Promise.all(
      cs.map((c, k) => c.request({ cmd: 'add', eapIds: Array.from({ length: AGENTS }, (_, i) => i).filter((i) => i % cs.length === k) })),
    );
    viewer = new JsonChild([__filename, '--viewer-child', String(httpPort)], 'bench viewer');
    await viewer.ready;
    const flushed = { without: [] as number[], with: [] as number[] };
    let flushedInto = flushed.without;
    const fanout = async (): Promise<number[]> => {
      const ms: number[] = [];
      for (let k = 0; k < PUBLISHES + 1; k++) {
        const { version, t0 } = (await orch.request({ cmd: 'publish' })) as { version: number; t0: number };
        const reports = (await Promise.all(cs.map((c) => c.request({ cmd: 'expect', version })))) as { last: number }[];
        const { flushedMs } = (await orch.request({ cmd: 'flushed', version })) as { flushedMs: number | null };
        if (flushedMs === null) throw new Error(`bench-dashboard: weights v${version} were not flushed to every session`);
        if (k > 0) flushedInto.push(flushedMs);
        if (k > 0) ms.push(Math.max(...reports.map((r) => r.last)) - t0);
        await new Promise((r) => setTimeout(r, 50));
      }
      return ms;
    };
    const without: number[] = [];
    const withViewer: number[] = [];
    // the orchestrator process's CPU time per wall second over each kind of phase
    const cpu = { without: { cpuMs: 0, wallMs: 0 }, with: { cpuMs: 0, wallMs: 0 } };
    const phase = async (into: { cpuMs: number; wallMs: number }, run: () => Promise<number[]>): Promise<number[]> => {
      const a = (await orch.request({ cmd: 'cpu' })) as { cpuMs: number; wallMs: number };
      const ms = await run();
      const b = (await orch.request({ cmd: 'cpu' })) as { cpuMs: number; wallMs: number };
      into.cpuMs += b.cpuMs - a.cpuMs;
      into.wallMs += b.wallMs - a.wallMs;
      return ms;
    };
    let snapshots = 0;
    let statusCalls = 0;
    for (let r = 0; r < ROUNDS; r++) {
      flushedInto = flushed.without;
      without.push(...(await phase(cpu.without, fanout)));
      const c = (await viewer.request({ cmd: 'connect' })) as { agents: number };
      if (c.agents !== AGENTS) throw new Error(`bench-dashboard: the viewer saw ${c.agents} agents, expected ${AGENTS}`);
      flushedInto = flushed.with;
      withViewer.push(...(await phase(cpu.with, fanout)));
      const d = (await viewer.request({ cmd: 'disconnect' })) as { snapshots: number; statusCalls: number };
      snapshots = d.snapshots;
      statusCalls = d.statusCalls;
    }
    const snap = (await orch.request({ cmd: 'snapshot' })) as { p99: number; p50: number; bytes: number; sessions: number };
    const p99Without = quantile(without, 0.99);
    const p99With = quantile(withViewer, 0.99);
    const results: BenchResult[] = [
      {
        name: `dashboard.fanoutMs.p99.${AGENTS}.without`,
        value: round(p99Without, 1),
        unit: `ms (publish -> all ${AGENTS} decoded, no viewer; ${without.length} publishes; median ${round(quantile(without, 0.5), 1)})`,
      },
      {
        name: `dashboard.fanoutMs.p99.${AGENTS}.with`,
        value: round(p99With, 1),
        unit: `ms (the same with a viewer: stream + /v1/status each second, ${snapshots} snapshots and ${statusCalls} status calls read; median ${round(quantile(withViewer, 0.5), 1)})`,
      },
      { name: `dashboard.fanoutP99Ratio.${AGENTS}`, value: round(p99With / p99Without, 3), unit: 'with / without (bar: <= 1.05)' },
      {
        name: `dashboard.flushedMs.p99.${AGENTS}.without`,
        value: round(quantile(flushed.without, 0.99), 1),
        unit: `ms (the orchestrator's side: publish -> the last of ${AGENTS} sockets took the frame, no viewer; median ${round(quantile(flushed.without, 0.5), 1)})`,
      },
      {
        name: `dashboard.flushedMs.p99.${AGENTS}.with`,
        value: round(quantile(flushed.with, 0.99), 1),
        unit: `ms (the same with a viewer; median ${round(quantile(flushed.with, 0.5), 1)})`,
      },
      {
        name: `dashboard.orchestratorCpuMsPerS.${AGENTS}.without`,
        value: round((cpu.without.cpuMs / cpu.without.wallMs) * 1000, 1),
        unit: 'ms of the orchestrator process CPU per second, fan-out phases without a viewer',
      },
      {
        name: `dashboard.orchestratorCpuMsPerS.${AGENTS}.with`,
        value: round((cpu.with.cpuMs / cpu.with.wallMs) * 1000, 1),
        unit: 'ms of CPU per second, the same phases with a viewer',
      },
      {
        name: `dashboard.snapshotMs.p99.${AGENTS}`,
        value: round(snap.p99, 2),
        unit: `ms (one snapshot, ${snap.sessions} agents, 40 nodes; median ${round(snap.p50, 2)})`,
      },
      { name: `dashboard.snapshotKB.${AGENTS}`, value: round(snap.bytes / 1024, 1), unit: 'KB (one snapshot as sent)' },
    ];
    results.push(...(await browserCheck(httpPort)));
    return results;
  } finally {
    await viewer?.stop();
    await Promise.all(clients.map((c) => c?.stop()));
    await orch.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

if (require.main === module && process.argv[2] === '--orchestrator-child') {
  orchestratorChild(process.argv[3]).catch((e) => {
    process.stderr.write(`bench-dashboard orchestrator child: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  });
} else if (require.main === module && process.argv[2] === '--viewer-child') {
  viewerChild(Number(process.argv[3]));
} else if (require.main === module) {
  benchDashboard()
    .then((rs) => rs.forEach((r) => process.stdout.write(`${r.name.padEnd(44)} ${String(r.value).padStart(12)} ${r.unit}\n`)))
    .catch((e) => {
      process.stderr.write(`bench-dashboard: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    });
}
