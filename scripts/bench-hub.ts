/**
 * Live-runtime figures for `npm run bench` (DESIGN.md section 5), loaded by scripts/bench.ts:
 *
 *   codec.decodeMs.weights256k          decode (+ full validation, CRC) of a 256 KiB weights frame, median
 *   codec.decodeMs.weights200kFloats    the same for a 200k-float (800 KB) frame, the shipped model's size
 *   hub.fanoutMs.p99.<N>                N = 10, 100, 200 ws clients: publish -> every client has decoded it;
 *                                       p99 over 20 publishes of the max over clients
 *   hub.flushedMs.p99.<N>               the orchestrator's side of it: publish -> the last session's socket has
 *                                       taken the whole frame (ws send callback, the hub's `flushed` event)
 *   hub.publishMs.p99.<N>               of that, the hub's own publishWeights call (pack, SQLite, sends)
 *   hub.clientDecodeMs.p50.<N>          sum of the clients' decode times per publish: all N clients share
 *                                       this machine, so on a small one they, not the hub, set the pace
 *   orchestrator.rssMB.200agents        RSS of the hub process (its own child process) with 200 sessions
 *   agent.rssMB                         peak RSS (VmHWM) of a real `kais agent` process over the ingress runs
 *   ingress.overheadMs.p99              p99(through the agent) - p99(direct to the same backend) at 1000 req/s,
 *                                       one path after the other (KAIS_BENCH_INGRESS_RATE overrides the rate,
 *                                       KAIS_BENCH_INGRESS_SECONDS the 5 s per run)
 *   ingress.agentMs.p99, ingress.directMs.p99   the two terms of that difference
 *   ingress.minimalProxyOverheadMs.p99  the same overhead through a bare Node HTTP proxy child (the floor of any Node hop)
 *   ingress.*.250rps                    the same at 250 req/s
 *   ingress.*.pinned                    at 1000 req/s again with the agent (or bare proxy) pinned to CPU 1 and the load
 *                                       generator, backend and hub to CPU 0 (taskset), as on an eAP host of its own
 *   agent.cpuMsPerRequest               the agent process's CPU time per request over the 1000 req/s run
 *
 * Processes: the hub runs in a child (`node dist/scripts/bench-hub.js --hub-child <db>`: the
 * orchestrator's Store + startHub + ModelRegistry on a temp SQLite file, port 0, driven by JSON
 * lines on stdin), so its RSS is its own. The fan-out clients (raw ws clients doing the agent's
 * `hello` with the token, decoding every frame with the codec, as AgentLink + AgentRuntime do) run
 * in two more children (`--clients-child <port>`). The ingress runs start a fixed-service-time
 * backend child (scripts/bench-hub-backend.ts), a bare proxy child (scripts/bench-hub-minimal-proxy.ts)
 * and a real `node dist/kais.js agent` child against the hub; the load generator is this process.
 *
 * Weights: the shipped models/kais-cmmac.bin (195,753 floats, about 780 KB), published as a new
 * version each time.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import * as readline from 'node:readline';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import WebSocket from 'ws';
import { Codec, encodeFrame } from '../shared/protocol/codec';
import { makeFrame } from '../shared/protocol/envelope';
import { packWeights, weightsFromBytes, type WeightTensor } from '../shared/protocol/weights';
import { round } from '../shared/round';
import kaisScenario from '../shared/scenarios/kais.json';
import type { BenchResult } from './bench';

const TOKEN = 'bench-token';
const FANOUT_AGENTS = [10, 100, 200] as const;
const PUBLISHES = 20;
/** Requests per second on each path (KAIS_BENCH_INGRESS_RATE overrides it, for a quick look). */
const INGRESS_RATE = Number(process.env.KAIS_BENCH_INGRESS_RATE) || 1000;
const INGRESS_SECONDS = Number(process.env.KAIS_BENCH_INGRESS_SECONDS) || 5;
/** Developer knobs: KAIS_BENCH_HUB_PARTS=ingress skips the fan-out runs; KAIS_BENCH_AGENT_NODE_ARGS
 * (space-separated, e.g. `--cpu-prof --cpu-prof-dir=/tmp/prof`) go to the agent child's node. */
const HUB_PARTS = (process.env.KAIS_BENCH_HUB_PARTS ?? 'codec,fanout,ingress').split(',');
const AGENT_NODE_ARGS = (process.env.KAIS_BENCH_AGENT_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

export function quantile(xs: number[], q: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)];
}

function shippedModelPath(): string {
  for (const dir of [path.join(__dirname, '..', '..', 'models'), path.join(__dirname, '..', 'models')]) {
    const f = path.join(dir, 'kais-cmmac.bin');
    if (fs.existsSync(f)) return f;
  }
  throw new Error('bench-hub: models/kais-cmmac.bin not found');
}

export function shippedWeights(): WeightTensor[] {
  const body = weightsFromBytes(fs.readFileSync(shippedModelPath()));
  return body.tensors.map((data, i) => ({ shape: body.shapes[i], data }));
}

/** `gc()` without --expose-gc on the command line (only between timed runs, never inside one). */
function gcFunction(): () => void {
  v8.setFlagsFromString('--expose-gc');
  return vm.runInNewContext('gc') as () => void;
}

/** A child process that prints JSON lines; `request` writes one JSON line and waits for the next reply. */
export class JsonChild {
  readonly proc: ChildProcess;
  private readonly waiting: ((msg: Record<string, unknown>) => void)[] = [];
  private readonly errTail: string[] = [];
  readonly ready: Promise<Record<string, unknown>>;

  constructor(args: string[], name: string) {
    this.proc = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    readline.createInterface({ input: this.proc.stderr! }).on('line', (l) => {
      this.errTail.push(l);
      if (this.errTail.length > 10) this.errTail.shift();
    });
    this.ready = new Promise((resolve, reject) => {
      this.waiting.push(resolve);
      this.proc.once('exit', (code) => reject(new Error(`${name} exited (${code}): ${this.errTail.join(' | ')}`)));
    });
    readline.createInterface({ input: this.proc.stdout! }).on('line', (line) => {
      let msg: Record<string, unknown>;
      try {
        msg = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      this.waiting.shift()?.(msg);
    });
  }

  stderrTail(): string {
    return this.errTail.join(' | ');
  }

  /** The next JSON line the child prints, whatever asked for it. */
  next(): Promise<Record<string, unknown>> {
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  request(cmd: Record<string, unknown>): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      this.waiting.push(resolve);
      this.proc.stdin!.write(`${JSON.stringify(cmd)}\n`);
    });
  }

  stop(): Promise<void> {
    if (this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 40_000);
      this.proc.once('exit', () => {
        clearTimeout(t);
        resolve();
      });
      this.proc.kill('SIGTERM');
    });
  }
}

/** Peak and current RSS of a process from /proc (Linux), MB; null elsewhere. */
function procRssMB(pid: number): { rss: number; peak: number } | null {
  try {
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const kb = (key: string) => Number(/\s(\d+) kB/.exec(status.split('\n').find((l) => l.startsWith(key)) ?? '')?.[1]);
    return { rss: kb('VmRSS:') / 1024, peak: kb('VmHWM:') / 1024 };
  } catch {
    return null;
  }
}

/** CPU time (user + system) a process has used so far, ms; null where /proc is missing. */
function procCpuMs(pid: number): number | null {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from the 3rd on
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // utime, stime in USER_HZ (100)
  } catch {
    return null;
  }
}

// ---------------------------------------------------------------------------------------------
// CODEC
// ---------------------------------------------------------------------------------------------

function codecBench(): BenchResult[] {
  const gc = gcFunction();
  const codec = new Codec();
  const results: BenchResult[] = [];
  const shipped = shippedWeights();
  const floats256k = new Float32Array(65_536 - 32); // frame of 256 KiB with the envelope
  for (let i = 0; i < floats256k.length; i++) floats256k[i] = Math.sin(i) * 0.1;
  const sets: [string, WeightTensor[]][] = [
    ['weights256k', [{ shape: [floats256k.length], data: floats256k }]],
    ['weights200kFloats', shipped],
  ];
  for (const [name, tensors] of sets) {
    const bytes = encodeFrame(makeFrame('weights', 1, packWeights(tensors, 1)));
    const times: number[] = [];
    for (let r = 0; r < 55; r++) {
      gc(); // each decode gets memory back from the previous one, as an agent between two pushes
      const t0 = performance.now();
      const res = codec.decode(bytes);
      const dt = performance.now() - t0;
      if (!res.ok) throw new Error(`bench-hub: ${name} frame did not decode: ${res.error.message}`);
      if (r >= 5) times.push(dt);
    }
    results.push({ name: `codec.decodeMs.${name}`, value: round(quantile(times, 0.5), 3), unit: `ms (median; ${bytes.length} B frame)` });
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// HUB child process
// ---------------------------------------------------------------------------------------------

async function hubChild(dbFile: string): Promise<void> {
  /* eslint-disable @typescript-eslint/no-require-imports */
  const { Store } = require('../orchestrator/store') as typeof import('../orchestrator/store');
  const { ModelRegistry, startHub } = require('../orchestrator/registry') as typeof import('../orchestrator/registry');
  const { initialPlacement } = require('../orchestrator/emulated-cluster') as typeof import('../orchestrator/emulated-cluster');
  const { loadScenario } = require('../shared/scenario') as typeof import('../shared/scenario');
  /* eslint-enable @typescript-eslint/no-require-imports */
  const store = Store.open(dbFile);
  const hub = await startHub(store, { token: TOKEN });
  const registry = new ModelRegistry(store, hub);
  const weights = shippedWeights();
  const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  const stop = async () => {
    registry.dispose();
    await hub.close();
    store.close();
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.stdin.once('end', () => void stop()); // the bench process is gone
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
    if (cmd.cmd === 'flushed') {
      const f = flushes.get(cmd.version!);
      const reply = () => out({ flushedMs: f?.ms ?? null });
      if (!f || f.ms !== null) reply();
      else f.waiter = reply;
    } else if (cmd.cmd === 'publish') {
      const t0 = performance.timeOrigin + performance.now();
      const version = (store.latestModelVersion() ?? 0) + 1;
      flushes.set(version, { t0, want: hub.sessions().length, got: 0, ms: null, waiter: null });
      const body = registry.publishWeights(weights);
      out({ version: body.version, t0, publishMs: performance.timeOrigin + performance.now() - t0 });
    } else if (cmd.cmd === 'placement') {
      const body = registry.publishPlacement(0, initialPlacement(loadScenario('kais')));
      out({ version: body.version });
    } else if (cmd.cmd === 'rss') {
      out({ rssMB: process.memoryUsage().rss / 1024 / 1024, sessions: hub.sessions().length });
    }
  });
  out({ ready: true, port: hub.port });
}

// ---------------------------------------------------------------------------------------------
// FAN-OUT
// ---------------------------------------------------------------------------------------------

/** A ws client that says `hello` like an agent and decodes every frame; `decodedAt` per weights version. */
class BenchClient {
  readonly ws: WebSocket;
  readonly decodedAt = new Map<number, number>();
  readonly receivedAt = new Map<number, number>();
  readonly welcomed: Promise<void>;
  onWeights: (() => void) | null = null;

  constructor(url: string, eapId: number, codec: Codec) {
    this.ws = new WebSocket(url, { perMessageDeflate: false, maxPayload: codec.maxFrameBytes });
    this.ws.on('error', () => undefined);
    this.welcomed = new Promise((resolve, reject) => {
      this.ws.once('open', () => {
        const hello = makeFrame('hello', 0, { eapId, token: TOKEN, agentVersion: 'bench', weightVersion: null, placementVersion: null });
        this.ws.send(codec.encode(hello));
      });
      this.ws.once('close', (code) => reject(new Error(`bench client ${eapId} closed (${code})`)));
      this.ws.on('message', (data: Buffer) => {
        const tRecv = performance.timeOrigin + performance.now();
        const r = codec.decode(data);
        if (!r.ok) throw new Error(`bench client ${eapId}: ${r.error.message}`);
        if (r.frame.type === 'welcome') resolve();
        if (r.frame.type === 'weights') {
          this.decodedAt.set(r.frame.body.version, performance.timeOrigin + performance.now());
          this.receivedAt.set(r.frame.body.version, tRecv);
          this.onWeights?.();
        }
      });
    });
  }
}

/**
 * A child holding some of the fan-out clients (`--clients-child <port>`). Commands on stdin:
 * `{"cmd":"add","eapIds":[..]}` connects more (reply `{"clients": n}` once all are welcomed);
 * `{"cmd":"expect","version":v}` replies `{"last": t, "decodeMs": sum}` once every client has
 * decoded weights version v (t: when the last one finished, ms since the epoch, sub-ms).
 */
async function clientsChild(port: number): Promise<void> {
  const codec = new Codec();
  const gc = gcFunction();
  const clients: BenchClient[] = [];
  const out = (o: unknown) => process.stdout.write(`${JSON.stringify(o)}\n`);
  process.stdin.once('end', () => process.exit(0));
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    const cmd = JSON.parse(line) as { cmd: string; eapIds?: number[]; version?: number };
    if (cmd.cmd === 'add') {
      for (const id of cmd.eapIds!) clients.push(new BenchClient(`ws://127.0.0.1:${port}`, id, codec));
      void Promise.all(clients.map((c) => c.welcomed)).then(() => out({ clients: clients.length }));
    } else if (cmd.cmd === 'expect') {
      const v = cmd.version!;
      const report = () => {
        if (!clients.every((c) => c.decodedAt.has(v))) return;
        for (const c of clients) c.onWeights = null;
        const last = Math.max(...clients.map((c) => c.decodedAt.get(v)!));
        const decodeMs = clients.reduce((sum, c) => sum + (c.decodedAt.get(v)! - c.receivedAt.get(v)!), 0);
        out({ last, decodeMs });
        setImmediate(gc); // after the report: memory back before the next publish
      };
      for (const c of clients) c.onWeights = report;
      report();
    }
  });
  out({ ready: true });
}

/** Clients are split over CLIENT_PROCESSES children, as agents are separate processes. */
const CLIENT_PROCESSES = 2;

async function fanoutBench(hub: JsonChild, port: number): Promise<BenchResult[]> {
  const results: BenchResult[] = [];
  const children = Array.from(
    { length: CLIENT_PROCESSES },
    () => new JsonChild([__filename, '--clients-child', String(port)], 'bench clients'),
  );
  try {
    await Promise.all(children.map((c) => c.ready));
    let connected = 0;
    for (const n of FANOUT_AGENTS) {
      const ids = Array.from({ length: n - connected }, (_, i) => connected + i);
      await Promise.all(children.map((c, k) => c.request({ cmd: 'add', eapIds: ids.filter((id) => id % CLIENT_PROCESSES === k) })));
      connected = n;
      const fanoutMs: number[] = [];
      const hubMs: number[] = [];
      const decodeMs: number[] = [];
      const flushedMs: number[] = [];
      for (let k = 0; k < PUBLISHES + 1; k++) {
        const { version, t0, publishMs } = (await hub.request({ cmd: 'publish' })) as { version: number; t0: number; publishMs: number };
        const reports = (await Promise.all(children.map((c) => c.request({ cmd: 'expect', version })))) as {
          last: number;
          decodeMs: number;
        }[];
        const { flushedMs: fMs } = (await hub.request({ cmd: 'flushed', version })) as { flushedMs: number | null };
        if (k > 0) {
          if (fMs === null) throw new Error(`bench-hub: weights v${version} were not flushed to every session`);
          flushedMs.push(fMs);
          // the first publish after new connections is a warm-up
          fanoutMs.push(Math.max(...reports.map((r) => r.last)) - t0);
          hubMs.push(publishMs);
          decodeMs.push(reports.reduce((sum, r) => sum + r.decodeMs, 0));
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      results.push(
        {
          name: `hub.fanoutMs.p99.${n}`,
          value: round(quantile(fanoutMs, 0.99), 1),
          unit: `ms (publish -> all ${n} decoded; median ${round(quantile(fanoutMs, 0.5), 1)})`,
        },
        {
          name: `hub.flushedMs.p99.${n}`,
          value: round(quantile(flushedMs, 0.99), 1),
          unit: `ms (the orchestrator's side: publish -> the last of ${n} sockets took the frame; median ${round(quantile(flushedMs, 0.5), 1)})`,
        },
        {
          name: `hub.publishMs.p99.${n}`,
          value: round(quantile(hubMs, 0.99), 1),
          unit: `ms (the hub's publishWeights call: pack, store, send to ${n}; median ${round(quantile(hubMs, 0.5), 1)})`,
        },
        {
          name: `hub.clientDecodeMs.p50.${n}`,
          value: round(quantile(decodeMs, 0.5), 1),
          unit: `ms (sum of the ${n} clients' decode times per publish, on ${CLIENT_PROCESSES} processes)`,
        },
      );
    }
    const { rssMB, sessions } = (await hub.request({ cmd: 'rss' })) as { rssMB: number; sessions: number };
    if (sessions !== 200) throw new Error(`bench-hub: the hub has ${sessions} sessions, expected 200`);
    results.push({ name: 'orchestrator.rssMB.200agents', value: round(rssMB, 1), unit: 'MB (hub child process, 200 sessions)' });
  } finally {
    await Promise.all(children.map((c) => c.stop()));
  }
  return results;
}

// ---------------------------------------------------------------------------------------------
// INGRESS: agent overhead against a fixed-service-time backend, and the agent's peak RSS
// ---------------------------------------------------------------------------------------------

/**
 * The two plain-HTTP children of the ingress runs, compiled with the rest: the backend (answers
 * `POST /serve` at once) and the floor, a bare Node HTTP proxy measured in the same run at the
 * same rates, so `ingress.overheadMs` can be read against what any Node HTTP hop costs here.
 */
const BACKEND_JS = path.join(__dirname, 'bench-hub-backend.js');
const MINIMAL_PROXY_JS = path.join(__dirname, 'bench-hub-minimal-proxy.js');

/** The kais scenario with an instant network, so the agent's emulated transfer waits are 0. */
function instantNetworkScenario(dir: string): string {
  const kais = structuredClone(kaisScenario) as { network: Record<string, { latencyMs: number; mbps: number }> };
  for (const link of Object.values(kais.network)) {
    link.latencyMs = 0;
    link.mbps = 1e9;
  }
  const file = path.join(dir, 'kais-instant.json');
  fs.writeFileSync(file, JSON.stringify(kais));
  return file;
}

function timedPost(agent: http.Agent, port: number, p: string, body: string): Promise<number> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: p,
        method: 'POST',
        agent,
        headers: { 'content-length': Buffer.byteLength(body), 'content-type': 'application/json' },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode === 200 ? performance.now() - t0 : -1));
      },
    );
    req.on('error', () => resolve(-1));
    req.end(body);
  });
}

/**
 * Open-loop load: `rate` POSTs per second for INGRESS_SECONDS, sent on schedule whatever the
 * answers do (keep-alive sockets); the first second is a warm-up and not counted. With `pid`, the
 * CPU time and peak RSS of that process over the counted part.
 */
async function openLoop(
  rate: number,
  port: number,
  p: string,
  body: string,
  pid: number | null,
): Promise<{ ms: number[]; cpuMsPerRequest: number | null; peakRssMB: number }> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });
  const total = Math.round(rate * INGRESS_SECONDS);
  const warm = rate;
  const ms: number[] = [];
  const pending: Promise<void>[] = [];
  let failed = 0;
  let peakRssMB = 0;
  let cpu0: number | null = null;
  const t0 = performance.now();
  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * rate));
      for (; sent < due; sent++) {
        const keep = sent >= warm;
        if (sent === warm && pid !== null) cpu0 = procCpuMs(pid);
        pending.push(
          timedPost(agent, port, p, body).then((dt) => {
            if (dt < 0) failed++;
            else if (keep) ms.push(dt);
          }),
        );
        if (pid !== null && sent % 100 === 0) peakRssMB = Math.max(peakRssMB, procRssMB(pid)?.rss ?? 0);
      }
      if (sent >= total) resolve();
      else setTimeout(tick, 1);
    };
    tick();
  });
  await Promise.all(pending);
  const cpu1 = pid === null ? null : procCpuMs(pid);
  agent.destroy();
  if (failed > total * 0.01) throw new Error(`bench-hub: ${failed} of ${total} requests to port ${port}${p} failed`);
  const cpuMsPerRequest = cpu0 !== null && cpu1 !== null ? (cpu1 - cpu0) / (total - warm) : null;
  return { ms, cpuMsPerRequest, peakRssMB };
}

/**
 * Pins every thread of `pids` to CPU `cpu` (-1: all CPUs again) with taskset; false when it
 * cannot (no taskset, fewer than 2 CPUs).
 */
function pin(pids: number[], cpu: number): boolean {
  const n = os.cpus().length;
  if (n < 2) return false;
  const list = cpu < 0 ? `0-${n - 1}` : String(cpu);
  for (const pid of pids) {
    const r = spawnSync('taskset', ['-a', '-cp', list, String(pid)], { stdio: 'ignore' });
    if (r.status !== 0) return false;
  }
  return true;
}

async function ingressBench(hubPort: number, hubPid: number, dir: string): Promise<BenchResult[]> {
  const kaisJs = path.join(__dirname, '..', 'kais.js');
  const backend = new JsonChild([BACKEND_JS], 'backend');
  let agentChild: JsonChild | null = null;
  let minimal: JsonChild | null = null;
  try {
    const { port: backendPort } = (await backend.ready) as { port: number };
    const backendUrl = `http://127.0.0.1:${backendPort}`;
    const targetsFile = path.join(dir, 'targets.json');
    fs.writeFileSync(targetsFile, JSON.stringify({ nodes: Array.from({ length: 40 }, () => backendUrl), cloud: backendUrl }));
    agentChild = new JsonChild(
      [
        ...AGENT_NODE_ARGS,
        kaisJs,
        'agent',
        '--orchestrator',
        `ws://127.0.0.1:${hubPort}`,
        '--eap',
        '0',
        '--token',
        TOKEN,
        '--targets',
        targetsFile,
        '--scenario',
        instantNetworkScenario(dir),
        '--cache',
        path.join(dir, 'agent-cache'),
      ],
      'kais agent',
    );
    const { port: agentPort } = (await agentChild.ready) as { port: number };
    const health = async () => {
      const r = await fetch(`http://127.0.0.1:${agentPort}/healthz`);
      return (await r.json()) as { policy: string; weightVersion: number | null; placementVersion: number | null };
    };
    for (let i = 0; (await health()).policy !== 'cmmac' || (await health()).placementVersion === null; i++) {
      if (i > 1200)
        throw new Error(
          `bench-hub: the agent never got weights and placement: ${JSON.stringify(await health())} ${agentChild!.stderrTail()}`,
        );
      await new Promise((r) => setTimeout(r, 50));
    }

    const agentBody = JSON.stringify({ service: 0, deadlineMs: 2000, payloadBytes: 0, workCoreS: 0 });
    const agentPid = agentChild.proc.pid!;
    const direct = (rate: number) => openLoop(rate, backendPort, '/serve?service=0&work=0', '', null);
    const viaAgent = (rate: number) => openLoop(rate, agentPort, '/request', agentBody, agentPid);
    // The two paths one after the other (at once, the load generator, backend and agent need more
    // than this 2-core machine has), each at INGRESS_RATE, then both again at a rate well below
    // saturation, so the overhead without queueing is visible as well.
    const results: BenchResult[] = [];
    const lowRate = Math.min(250, INGRESS_RATE);
    let peakMB = 0;
    minimal = new JsonChild([MINIMAL_PROXY_JS, String(backendPort)], 'minimal proxy');
    const { port: minimalPort } = (await minimal.ready) as { port: number };
    const viaMinimal = (rate: number) => openLoop(rate, minimalPort, '/request', agentBody, minimal!.proc.pid!);
    for (const rate of INGRESS_RATE === lowRate ? [lowRate] : [INGRESS_RATE, lowRate]) {
      const d = await direct(rate);
      const m = await viaMinimal(rate);
      const a = await viaAgent(rate);
      peakMB = Math.max(peakMB, a.peakRssMB);
      const suffix = rate === INGRESS_RATE ? '' : `.${rate}rps`;
      const pA = quantile(a.ms, 0.99);
      const pD = quantile(d.ms, 0.99);
      results.push(
        { name: `ingress.overheadMs.p99${suffix}`, value: round(pA - pD, 2), unit: `ms (p99 via agent - p99 direct, ${rate} req/s)` },
        { name: `ingress.agentMs.p99${suffix}`, value: round(pA, 2), unit: `ms (median ${round(quantile(a.ms, 0.5), 2)}, ${rate} req/s)` },
        { name: `ingress.directMs.p99${suffix}`, value: round(pD, 2), unit: `ms (median ${round(quantile(d.ms, 0.5), 2)}, ${rate} req/s)` },
        {
          name: `ingress.minimalProxyOverheadMs.p99${suffix}`,
          value: round(quantile(m.ms, 0.99) - pD, 2),
          unit: `ms (the floor: a bare Node HTTP proxy, same backend and load, ${rate} req/s; its CPU ${m.cpuMsPerRequest === null ? '?' : round(m.cpuMsPerRequest, 3)} ms/request)`,
        },
      );
      if (rate === INGRESS_RATE && a.cpuMsPerRequest !== null) {
        results.push({
          name: 'agent.cpuMsPerRequest',
          value: round(a.cpuMsPerRequest, 3),
          unit: `ms (kais agent user+system CPU per request at ${rate} req/s)`,
        });
      }
    }
    // Again at INGRESS_RATE with the proxy under test on a core of its own (the agent runs on its
    // eAP host; devices and backends are elsewhere): agent / bare proxy pinned to CPU 1, this
    // process (the load generator), the backend and the hub to CPU 0. Skipped without taskset or
    // with fewer than 2 CPUs.
    const others = [process.pid, backend.proc.pid!, hubPid];
    if (pin([agentPid, minimal.proc.pid!], 1) && pin(others, 0)) {
      try {
        const d = await direct(INGRESS_RATE);
        const m = await viaMinimal(INGRESS_RATE);
        const a = await viaAgent(INGRESS_RATE);
        const pD = quantile(d.ms, 0.99);
        results.push(
          {
            name: 'ingress.overheadMs.p99.pinned',
            value: round(quantile(a.ms, 0.99) - pD, 2),
            unit: `ms (the same, agent pinned to CPU 1, load generator + backend to CPU 0; median ${round(quantile(a.ms, 0.5), 2)} vs ${round(quantile(d.ms, 0.5), 2)} direct)`,
          },
          {
            name: 'ingress.minimalProxyOverheadMs.p99.pinned',
            value: round(quantile(m.ms, 0.99) - pD, 2),
            unit: `ms (the bare proxy pinned the same way)`,
          },
        );
      } finally {
        pin([...others, agentPid, minimal.proc.pid!], -1);
      }
    }
    peakMB = Math.max(peakMB, procRssMB(agentPid)?.peak ?? 0); // VmHWM: the kernel's high-water mark
    results.push({
      name: 'agent.rssMB',
      value: round(peakMB, 1),
      unit: `MB (peak RSS of kais agent, cmmac weights, under the runs above)`,
    });
    return results;
  } finally {
    await agentChild?.stop();
    await minimal?.stop();
    await backend.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// Entry points
// ---------------------------------------------------------------------------------------------

export async function benchHub(): Promise<BenchResult[]> {
  const results = HUB_PARTS.includes('codec') ? codecBench() : [];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-bench-hub-'));
  const hub = new JsonChild([__filename, '--hub-child', path.join(dir, 'orchestrator.db')], 'hub');
  try {
    const { port } = (await hub.ready) as { port: number };
    if (HUB_PARTS.includes('fanout')) results.push(...(await fanoutBench(hub, port)));
    else await hub.request({ cmd: 'publish' }); // the agent needs a weights version to use the actor
    await hub.request({ cmd: 'placement' });
    if (HUB_PARTS.includes('ingress')) results.push(...(await ingressBench(port, hub.proc.pid!, dir)));
  } finally {
    await hub.stop();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return results;
}

if (require.main === module && process.argv[2] === '--clients-child') {
  clientsChild(Number(process.argv[3])).catch((e) => {
    process.stderr.write(`bench-hub clients child: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  });
} else if (require.main === module && process.argv[2] === '--hub-child') {
  hubChild(process.argv[3]).catch((e) => {
    process.stderr.write(`bench-hub hub child: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
    process.exit(1);
  });
} else if (require.main === module) {
  benchHub()
    .then((rs) => rs.forEach((r) => process.stdout.write(`${r.name.padEnd(44)} ${String(r.value).padStart(12)} ${r.unit}\n`)))
    .catch((e) => {
      process.stderr.write(`bench-hub: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
      process.exit(1);
    });
}
