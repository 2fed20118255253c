/**
 * Forwards one request to an edge node or the cloud over HTTP (keep-alive) and reports what came
 * of it. The target's wire format is the emulated cluster's (orchestrator/emulated-cluster.ts):
 * `POST <base>/serve?service=<w>&work=<core-s>&ttl=<ms>` -> 200 `{procMs, cpu, mem, waiting, busy}`,
 * 503 `{reason}` (full, no replica) or 504 `{reason}` (expired before it started).
 * A real service behind a small adapter answers the same way. Never throws: every failure is an
 * outcome.
 */
import * as http from 'node:http';
import { keepAliveAgentOptions } from '../shared/http-limits';

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

/** Where `<base>/serve` is: parsed once per base URL, not per request. */
interface ServeEndpoint {
  hostname: string;
  port: string;
  /** The path of `<base>/serve` (the query is appended per request). */
  path: string;
}

const NO_BODY_HEADERS = { 'content-length': 0 };

/** Largest answer read from a target (a node's or the cloud's is a few dozen bytes). */
export const MAX_ANSWER_BYTES = 64 * 1024;

export class Proxy {
  private readonly agent: http.Agent;
  private readonly endpoints = new Map<string, ServeEndpoint | null>();

  /** `maxSockets`: open connections per target at most (the dispatcher passes its in-flight limit). */
  constructor(maxSockets: number) {
    this.agent = new http.Agent(keepAliveAgentOptions(maxSockets)); // idle sockets closed before the node closes them
  }

  /** `ttlMs`: real ms the target has before the result is useless (it drops the request unstarted after that). */
  forward(
    baseUrl: string,
    service: number,
    workCoreS: number | null,
    timeoutMs: number,
    ttlMs: number | null = null,
  ): Promise<ProxyOutcome> {
    const work = workCoreS === null ? '' : `&work=${workCoreS}`;
    const ttl = ttlMs === null ? '' : `&ttl=${Math.max(0, Math.round(ttlMs))}`;
    const query = `?service=${service}${work}${ttl}`;
    let ep = this.endpoints.get(baseUrl);
    if (ep === undefined) {
      ep = serveEndpoint(baseUrl);
      this.endpoints.set(baseUrl, ep);
    }
    let hostname: string;
    let port: string;
    let path: string;
    if (ep) {
      ({ hostname, port } = ep);
      path = ep.path + query; // the query holds numbers only: nothing the URL parser would escape
    } else {
      // a base with its own query or fragment; one that is no URL at all is unreachable, never a throw
      // (a synchronous throw here was an unhandled rejection that ended the agent: readTargets now
      // refuses such a base at start)
      let url: URL;
      try {
        url = new URL(`${baseUrl}/serve${query}`);
      } catch (e) {
        return Promise.resolve({ kind: 'unreachable', reason: (e as Error).message });
      }
      ({ hostname, port } = url);
      hostname = bareHost(hostname);
      path = url.pathname + url.search;
    }
    return new Promise<ProxyOutcome>((resolve) => {
      let done = false;
      const finish = (o: ProxyOutcome) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        resolve(o);
      };
      const req = http.request({ hostname, port, path, method: 'POST', agent: this.agent, headers: NO_BODY_HEADERS }, (res) => {
        // the answer is a few dozen bytes: one chunk, kept as is; a target that streams on past the
        // cap is cut and counts as unreachable (one 300 MB answer took an agent to 1.3 GB)
        let first: Buffer | null = null;
        let more: Buffer[] | null = null;
        let size = 0;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) {
            finish({ kind: 'unreachable', reason: `an answer over ${MAX_ANSWER_BYTES} bytes` });
            req.destroy();
            return;
          }
          if (first === null) first = c;
          else (more ??= [first]).push(c);
        });
        res.on('error', (e) => finish({ kind: 'unreachable', reason: e.message }));
        res.on('end', () => {
          let body: Record<string, unknown> = {};
          try {
            const bytes: Buffer = more ? Buffer.concat(more) : (first ?? Buffer.alloc(0));
            body = JSON.parse(bytes.toString('utf8')) as Record<string, unknown>;
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
      });
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

/** `<base>/serve` parsed once; null for a base URL with a query or fragment (parsed per request then). */
function serveEndpoint(baseUrl: string): ServeEndpoint | null {
  if (baseUrl.includes('?') || baseUrl.includes('#')) return null;
  try {
    const url = new URL(`${baseUrl}/serve`);
    if (url.search !== '' || url.hash !== '') return null;
    return { hostname: bareHost(url.hostname), port: url.port, path: url.pathname };
  } catch {
    return null; // new URL throws again per request, as before
  }
}

/** A URL's host as http.request takes it: an IPv6 address without its brackets (`[::1]` was looked up as a name: ENOTFOUND). */
function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

function numbers(v: unknown): number[] | null {
  return Array.isArray(v) && v.every((x) => typeof x === 'number' && Number.isFinite(x) && x >= 0) ? (v as number[]) : null;
}
