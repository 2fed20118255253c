/**
 * Forwards one request to an edge node or the cloud over HTTP (keep-alive) and reports what came
 * of it. The target's wire format is the emulated cluster's (orchestrator/emulated-cluster.ts):
 * `POST <base>/serve?service=<w>&work=<core-s>&ttl=<ms>` -> 200 `{procMs, cpu, mem, waiting, busy}`,
 * 503 `{reason}` (full, no replica) or 504 `{reason}` (expired before it started).
 * A real service behind a small adapter answers the same way. Never throws: every failure is an
 * outcome.
 */
import * as http from 'node:http';

/** The target's own load report, when it sends one: per service waiting and busy counts. */
export interface TargetLoad {
  cpu: number | null;
  waiting: number[] | null;
  busy: number[] | null;
}

export type ProxyOutcome =
  | ({ kind: 'served'; status: number; procMs: number | null } & TargetLoad)
  | ({ kind: 'refused'; status: number; reason: string } & TargetLoad)
  | { kind: 'unreachable'; reason: string }
  | { kind: 'timeout' };

export class Proxy {
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 256 });

  /** `ttlMs`: real ms the target has before the result is useless (it drops the request unstarted after that). */
  forward(baseUrl: string, service: number, workCoreS: number | null, timeoutMs: number, ttlMs: number | null = null): Promise<ProxyOutcome> {
    const work = workCoreS === null ? '' : `&work=${workCoreS}`;
    const ttl = ttlMs === null ? '' : `&ttl=${Math.max(0, Math.round(ttlMs))}`;
    const url = new URL(`${baseUrl}/serve?service=${service}${work}${ttl}`);
    return new Promise<ProxyOutcome>((resolve) => {
      let done = false;
      const finish = (o: ProxyOutcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(o);
      };
      const req = http.request(
        { hostname: url.hostname, port: url.port, path: url.pathname + url.search, method: 'POST', agent: this.agent, headers: { 'content-length': 0 } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('error', (e) => finish({ kind: 'unreachable', reason: e.message }));
          res.on('end', () => {
            let body: Record<string, unknown> = {};
            try {
              body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
            } catch {
              // a target that answers without a JSON body: the status still says what happened
            }
            const status = res.statusCode ?? 0;
            const load: TargetLoad = {
              cpu: typeof body.cpu === 'number' ? body.cpu : null,
              waiting: numbers(body.waiting),
              busy: numbers(body.busy),
            };
            if (status >= 200 && status < 300) {
              finish({ kind: 'served', status, procMs: typeof body.procMs === 'number' ? body.procMs : null, ...load });
            } else {
              finish({ kind: 'refused', status, reason: typeof body.reason === 'string' ? body.reason : `status ${status}`, ...load });
            }
          });
        },
      );
      const timer = setTimeout(() => {
        finish({ kind: 'timeout' });
        req.destroy();
      }, timeoutMs);
      req.on('error', (e) => finish({ kind: 'unreachable', reason: e.message }));
      req.end();
    });
  }

  close(): void {
    this.agent.destroy();
  }
}

function numbers(v: unknown): number[] | null {
  return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0) ? (v as number[]) : null;
}
