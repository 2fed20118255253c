/**
 * `kais up`'s load generator (launcher/up.ts, step 4), also the one of the namespace harness
 * (test/support/netns-up.ts): the run's requests replayed at real time x `speed`, each POSTed to
 * its eAP's agent (`POST /request`).
 *
 * The device -> eAP upload is the generator's to emulate (the agent emulates the eAP -> target
 * transfer and the return): each request reaches its agent at arrival + upload
 * (shared/network.ts uploadS), as in the simulator, with the time left to its deadline; its
 * latency counts from the device.
 *
 * Accounting, from the device's side: a request is `completedInTime` (200 within its deadline),
 * `late` (200 after it), `refused` (any other answer, or a deadline the upload alone outlasts;
 * `reasons` counts why) or `unanswered` (no HTTP answer: connection error, or still open when the
 * generator gave up). sent = the sum of the four.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import type { Request } from '../shared/domain';
import { keepAliveAgentOptions } from '../shared/http-limits';
import { uploadS } from '../shared/network';
import type { Scenario } from '../shared/scenario';

export interface Counts {
  sent: number;
  completedInTime: number;
  late: number;
  refused: number;
  unanswered: number;
}

export interface ReplayOptions {
  scenario: Scenario;
  requests: Request[];
  /** x real time (scenario seconds per second). */
  speed: number;
  /** Seconds of load (real time): run() returns no earlier than this after its start. */
  durationS: number;
  /** Agent e's ingress, `http://host:port` or `https://host:port`. */
  agentUrls: string[];
  /** The CA the agents' https ingress is signed with (kais up --tls: the run's self-signed pair). */
  ca?: string;
  /** Checked between sends: true stops sending (kais up on Ctrl-C). */
  stopped?: () => boolean;
}

const zero = (): Counts => ({ sent: 0, completedInTime: 0, late: 0, refused: 0, unanswered: 0 });

/** One replay: the counts fill in as answers come (a live view reads them while run() runs). */
export class Replay {
  readonly total: Counts = zero();
  readonly per: Counts[];
  /** Why requests were refused or unanswered (`503 target full`, `no answer: ...`), with their counts. */
  readonly reasons: Record<string, number> = {};
  /** Device-side latencies (ms) of the 200 answers, in answer order. */
  readonly latencies: number[] = [];
  private readonly o: ReplayOptions;
  private readonly targets: URL[];
  private readonly httpAgents: http.Agent[];
  private readonly open = new Set<http.ClientRequest>();
  private outstandingCount = 0;
  private allAnswered: (() => void) | null = null;

  constructor(o: ReplayOptions) {
    this.o = o;
    this.per = o.agentUrls.map(zero);
    this.targets = o.agentUrls.map((u) => new URL(u));
    this.httpAgents = o.agentUrls.map((u) =>
      u.startsWith('https:') ? new https.Agent({ ...keepAliveAgentOptions(1024), ca: o.ca }) : new http.Agent(keepAliveAgentOptions(1024)),
    );
  }

  /** Requests sent and not answered yet. */
  get outstanding(): number {
    return this.outstandingCount;
  }

  /**
   * Sends every request at its time (scenario time 0 = `t0`, a performance.now()), waits out the
   * duration, then for every answer (at most 30 s: an agent answers each request within its
   * deadline + 10 s, and deadlines are < 20 s). Whatever is still open then stays open until close().
   */
  async run(t0 = performance.now()): Promise<void> {
    const { scenario, requests, speed } = this.o;
    const sendS = requests.map((r) => r.arrivalS + uploadS(scenario, r.inputMB));
    const order = Array.from(requests.keys()).sort((x, y) => sendS[x] - sendS[y] || x - y);
    await new Promise<void>((resolve) => {
      let i = 0;
      const tick = () => {
        const nowS = ((performance.now() - t0) / 1000) * speed;
        while (i < order.length && sendS[order[i]] <= nowS) this.fire(requests[order[i]], sendS[order[i++]]);
        if (i >= order.length || this.o.stopped?.()) {
          resolve();
          return;
        }
        const waitMs = ((sendS[order[i]] - nowS) * 1000) / speed;
        setTimeout(tick, Math.max(0, Math.min(50, waitMs)));
      };
      tick();
    });
    const remainingMs = this.o.durationS * 1000 - (performance.now() - t0);
    if (remainingMs > 0) await new Promise((r) => setTimeout(r, remainingMs));
    if (this.outstandingCount > 0) {
      await Promise.race([
        new Promise<void>((resolve) => (this.allAnswered = resolve)),
        new Promise<void>((resolve) => setTimeout(resolve, 30_000).unref()),
      ]);
    }
  }

  /** Gives up on the requests still open (they count as unanswered) and closes the connections. */
  close(): void {
    for (const req of [...this.open]) req.destroy(new Error('gave up waiting'));
    this.httpAgents.forEach((h) => h.destroy());
  }

  private record(b: number, kind: keyof Counts, reason?: string): void {
    this.total[kind]++;
    this.per[b][kind]++;
    if (reason) this.reasons[reason] = (this.reasons[reason] ?? 0) + 1;
  }

  /** POSTs request r, which reaches its agent at scenario time sendS (arrival + upload). */
  private fire(r: Request, sendS: number): void {
    const { speed } = this.o;
    const b = r.eap;
    const upMs = ((sendS - r.arrivalS) * 1000) / speed;
    const deadlineMs = ((r.deadlineS - sendS) * 1000) / speed;
    this.total.sent++;
    this.per[b].sent++;
    if (!(deadlineMs > 0)) {
      // the upload alone outlasts the deadline: the device never gets it in time (the simulator
      // counts it so too); the agent would refuse a deadline <= 0 with a 400
      this.record(b, 'refused', 'deadline passed during the upload');
      return;
    }
    const body = JSON.stringify({ service: r.service, deadlineMs, payloadBytes: Math.round(r.inputMB * 1e6), workCoreS: r.workCoreS });
    this.outstandingCount++;
    const t0 = performance.now();
    let settled = false;
    const settle = (kind: keyof Counts, reason?: string) => {
      if (settled) return;
      settled = true;
      this.open.delete(req);
      this.record(b, kind, reason);
      this.outstandingCount--;
      if (this.outstandingCount === 0 && this.allAnswered) this.allAnswered();
    };
    const url = this.targets[b];
    const req = (url.protocol === 'https:' ? https.request : http.request)(
      {
        host: url.hostname,
        port: Number(url.port),
        path: '/request',
        method: 'POST',
        agent: this.httpAgents[b],
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', () => settle('unanswered', 'response stream error'));
        res.on('end', () => {
          const ms = performance.now() - t0;
          if (res.statusCode === 200) {
            this.latencies.push(ms + upMs);
            settle(ms <= deadlineMs ? 'completedInTime' : 'late');
            return;
          }
          let reason = `status ${res.statusCode}`;
          try {
            const j = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { reason?: string };
            if (j.reason) reason = `${res.statusCode} ${j.reason.replace(/ of service \d+$/, '')}`;
          } catch {
            // keep the status as the reason
          }
          settle('refused', reason);
        });
      },
    );
    this.open.add(req);
    req.on('error', (e) => settle('unanswered', `no answer: ${e.message}`));
    req.end(body);
  }
}
