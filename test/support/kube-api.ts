/**
 * A local Kubernetes API server for tests: the subset of the real one that the Kubernetes
 * executor (orchestrator/kubernetes-executor.ts) uses, over real HTTP on loopback, answering as
 * kube-apiserver does. Not part of the product.
 *
 * Covered (and how the real server behaves there):
 * - core/v1 Nodes: `GET /api/v1/nodes` (NodeList) with `labelSelector` (`k`, `k=v`, `k!=v`, comma = and);
 * - apps/v1 Deployments in a namespace: list (DeploymentList with `metadata.resourceVersion`,
 *   `labelSelector`), `GET` one (404 NotFound Status), `POST` (201; 409 AlreadyExists), `PUT`
 *   (200; 409 Conflict when the body's `metadata.resourceVersion` is not the stored one; 404),
 *   `DELETE` (200); every write bumps one cluster-wide resourceVersion and `metadata.generation`
 *   on spec changes; 422 Invalid for a Deployment without selector/template/containers;
 * - watch (`?watch=true&resourceVersion=rv`): chunked newline-delimited `{type, object}` events
 *   (ADDED, MODIFIED, DELETED) after rv, the current objects as ADDED without rv, an `ERROR`
 *   event with a 410 Expired Status when rv is older than the kept history (`compact()`);
 * - a controller + kubelet stand-in: `status.replicas`, `status.readyReplicas` and
 *   `status.observedGeneration` follow `spec.replicas` after `readyDelayMs` when the pinned node
 *   (`spec.template.spec.nodeName`) exists and is Ready, and drop to 0 when it goes away;
 * - `silenceWatches()`: open watches get no more events but stay open (a silently dropped connection);
 * - faults: `failNext(k, 500 | 429 | 503, retryAfterS)` answers the next k non-watch requests
 *   with that status and a Status body (429 with `Retry-After`); `conflictNextPuts(k)` makes
 *   another writer update each of the next k PUT targets just before the PUT is handled (so the
 *   client's resourceVersion is stale and it gets a real 409);
 * - bearer-token authentication (401 Unauthorized Status otherwise).
 * Not covered: PATCH / server-side apply (the executor does not use them: 405), field selectors,
 * pagination (`limit`/`continue`), namespaces as objects, pods.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

type Obj = {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    resourceVersion?: string;
    generation?: number;
    uid?: string;
    creationTimestamp?: string;
  };
  spec?: Record<string, unknown> & {
    replicas?: number;
    template?: { spec?: { nodeName?: string; containers?: unknown[] } };
    selector?: unknown;
    unschedulable?: boolean;
  };
  status?: Record<string, unknown>;
};

interface WatchEvent {
  rv: number;
  ns: string;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  object: Obj;
}

export interface RequestLog {
  method: string;
  path: string;
  status: number;
}

const clone = <T>(x: T): T => JSON.parse(JSON.stringify(x)) as T;

function status(code: number, reason: string, message: string): object {
  return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message, reason, code };
}

function matches(labels: Record<string, string> | undefined, selector: string | null): boolean {
  if (!selector) return true;
  const l = labels ?? {};
  return selector.split(',').every((term) => {
    const t = term.trim();
    if (t.includes('!=')) {
      const [k, v] = t.split('!=');
      return l[k] !== v;
    }
    if (t.includes('=')) {
      const [k, v] = t.split(/==?/);
      return l[k] === v;
    }
    return t in l;
  });
}

export class FakeKubeApi {
  readonly token = 'test-token-0123456789';
  readonly requests: RequestLog[] = [];
  /** Delay before a Deployment's pods are ready (ms). */
  readyDelayMs = 50;
  private rv = 100;
  private readonly nodes = new Map<string, Obj>();
  private readonly deployments = new Map<string, Obj>(); // ns/name
  private history: WatchEvent[] = [];
  private oldestRv = 0;
  private readonly watchers = new Set<{ ns: string; selector: string | null; res: http.ServerResponse }>();
  private failures: { left: number; code: number; retryAfterS: number; match: RegExp | null } = {
    left: 0,
    code: 500,
    retryAfterS: 0,
    match: null,
  };
  private settledWaiters: (() => void)[] = [];
  private conflictPuts = 0;
  private racePost: Obj | null = null;
  private silenced = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  private server: http.Server | null = null;
  url = '';

  async listen(): Promise<string> {
    this.server = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => this.handle(req, res, body));
    });
    await new Promise<void>((r) => this.server!.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this.url;
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearTimeout(t);
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
    this.server?.closeAllConnections();
    await new Promise<void>((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  /** A kubeconfig for this server (plain HTTP on loopback, bearer token). */
  kubeconfig(): string {
    return [
      'apiVersion: v1',
      'kind: Config',
      'clusters:',
      '- name: local',
      '  cluster:',
      `    server: ${this.url}`,
      '    insecure-skip-tls-verify: true',
      'users:',
      '- name: kais',
      '  user:',
      `    token: ${this.token}`,
      'contexts:',
      '- name: local',
      '  context: {cluster: local, user: kais}',
      'current-context: local',
      '',
    ].join('\n');
  }

  // ---- the test's hands on the cluster ----

  addNode(name: string, labels: Record<string, string>, ready = true): void {
    const node: Obj = {
      apiVersion: 'v1',
      kind: 'Node',
      metadata: { name, labels, resourceVersion: String(++this.rv), uid: `node-${name}` },
      spec: {},
      status: { conditions: [{ type: 'Ready', status: ready ? 'True' : 'False' }] },
    };
    this.nodes.set(name, node);
    this.kubelet();
  }

  removeNode(name: string): void {
    this.nodes.delete(name);
    this.kubelet();
  }

  /** Creates a Deployment as another client would (a user's, not the executor's). */
  putForeign(ns: string, obj: Obj): Obj {
    return this.create(ns, clone(obj));
  }

  deployment(ns: string, name: string): Obj | undefined {
    const d = this.deployments.get(`${ns}/${name}`);
    return d ? clone(d) : undefined;
  }

  listDeployments(ns: string): Obj[] {
    return [...this.deployments.entries()].filter(([k]) => k.startsWith(`${ns}/`)).map(([, d]) => clone(d));
  }

  /** The next `count` non-watch requests (whose path matches `match`, if given) answer `code`. */
  failNext(count: number, code: number, retryAfterS = 0, match: RegExp | null = null): void {
    this.failures = { left: count, code, retryAfterS, match };
  }

  /** Resolves once the stand-in controller has no status update pending. */
  settled(): Promise<void> {
    return this.timers.size === 0 ? Promise.resolve() : new Promise((r) => this.settledWaiters.push(r));
  }

  get failuresLeft(): number {
    return this.failures.left;
  }

  /** Another writer creates `obj` just before the next POST is handled (so that POST gets 409 AlreadyExists). */
  raceNextPost(obj: object): void {
    this.racePost = clone(obj) as Obj;
  }

  conflictNextPuts(count: number): void {
    this.conflictPuts = count;
  }

  /** Forgets the watch history up to now (the next watch from an older rv gets 410 Gone). */
  compact(): void {
    this.oldestRv = this.rv;
    this.history = [];
  }

  /** Open watches stay open but get no more events (a connection a middlebox has silently dropped). */
  silenceWatches(): void {
    this.silenced = true;
  }

  /** Ends every open watch (as an API server restart or a load balancer timeout does). */
  dropWatches(): void {
    for (const w of this.watchers) w.res.end();
    this.watchers.clear();
  }

  // ---- the API ----

  private handle(req: http.IncomingMessage, res: http.ServerResponse, body: string): void {
    const u = new URL(req.url ?? '/', 'http://x');
    const send = (code: number, obj: object, headers: Record<string, string> = {}) => {
      this.requests.push({ method: req.method ?? '', path: u.pathname, status: code });
      res.writeHead(code, { 'content-type': 'application/json', ...headers });
      res.end(JSON.stringify(obj));
    };
    if (req.headers.authorization !== `Bearer ${this.token}`) return send(401, status(401, 'Unauthorized', 'Unauthorized'));
    const watching = u.searchParams.get('watch') === 'true' || u.searchParams.get('watch') === '1';
    if (!watching && this.failures.left > 0 && (!this.failures.match || this.failures.match.test(u.pathname))) {
      this.failures.left--;
      const { code, retryAfterS } = this.failures;
      const reason = code === 429 ? 'TooManyRequests' : code === 503 ? 'ServiceUnavailable' : 'InternalError';
      return send(
        code,
        status(code, reason, `injected ${code}`),
        code === 429 && retryAfterS > 0 ? { 'retry-after': String(retryAfterS) } : {},
      );
    }
    const selector = u.searchParams.get('labelSelector');
    if (u.pathname === '/api/v1/nodes' && req.method === 'GET') {
      const items = [...this.nodes.values()].filter((n) => matches(n.metadata.labels, selector));
      return send(200, { kind: 'NodeList', apiVersion: 'v1', metadata: { resourceVersion: String(this.rv) }, items: clone(items) });
    }
    const m = /^\/apis\/apps\/v1\/namespaces\/([^/]+)\/deployments(?:\/([^/]+))?$/.exec(u.pathname);
    if (!m) return send(404, status(404, 'NotFound', `the server could not find the requested resource (${u.pathname})`));
    const [, ns, name] = m;
    let parsed: Obj | null = null;
    if (body) {
      try {
        parsed = JSON.parse(body) as Obj;
      } catch {
        return send(400, status(400, 'BadRequest', 'the body is not JSON'));
      }
    }
    if (!name) {
      if (req.method === 'GET' && watching) return this.watch(ns, selector, u.searchParams.get('resourceVersion'), req, res);
      if (req.method === 'GET') {
        const items = this.listDeployments(ns).filter((d) => matches(d.metadata.labels, selector));
        return send(200, { kind: 'DeploymentList', apiVersion: 'apps/v1', metadata: { resourceVersion: String(this.rv) }, items });
      }
      if (req.method === 'POST') {
        if (this.racePost) {
          this.create(ns, this.racePost);
          this.racePost = null;
        }
        if (!parsed?.metadata?.name) return send(422, status(422, 'Invalid', 'metadata.name: Required value'));
        if (this.deployments.has(`${ns}/${parsed.metadata.name}`))
          return send(409, status(409, 'AlreadyExists', `deployments.apps "${parsed.metadata.name}" already exists`));
        const invalid = this.invalid(parsed);
        if (invalid) return send(422, status(422, 'Invalid', invalid));
        return send(201, this.create(ns, parsed));
      }
      return send(405, status(405, 'MethodNotAllowed', `${req.method} is not supported here`));
    }
    const key = `${ns}/${name}`;
    const cur = this.deployments.get(key);
    if (req.method === 'GET')
      return cur ? send(200, clone(cur)) : send(404, status(404, 'NotFound', `deployments.apps "${name}" not found`));
    if (req.method === 'PUT') {
      if (!cur) return send(404, status(404, 'NotFound', `deployments.apps "${name}" not found`));
      if (this.conflictPuts > 0) {
        this.conflictPuts--;
        // another writer got there first
        cur.metadata.labels = { ...cur.metadata.labels };
        cur.metadata.resourceVersion = String(++this.rv);
        this.emit(ns, 'MODIFIED', cur);
      }
      if (!parsed) return send(400, status(400, 'BadRequest', 'no body'));
      const invalid = this.invalid(parsed);
      if (invalid) return send(422, status(422, 'Invalid', invalid));
      if (parsed.metadata.resourceVersion !== cur.metadata.resourceVersion)
        return send(
          409,
          status(
            409,
            'Conflict',
            `Operation cannot be fulfilled on deployments.apps "${name}": the object has been modified; please apply your changes to the latest version and try again`,
          ),
        );
      const specChanged = JSON.stringify(parsed.spec) !== JSON.stringify(cur.spec);
      const next: Obj = {
        ...parsed,
        apiVersion: 'apps/v1',
        kind: 'Deployment',
        metadata: {
          ...parsed.metadata,
          namespace: ns,
          uid: cur.metadata.uid,
          creationTimestamp: cur.metadata.creationTimestamp,
          generation: (cur.metadata.generation ?? 1) + (specChanged ? 1 : 0),
          resourceVersion: String(++this.rv),
        },
        status: cur.status, // the status subresource is not written by a PUT of the object
      };
      this.deployments.set(key, next);
      this.emit(ns, 'MODIFIED', next);
      this.kubelet();
      return send(200, clone(next));
    }
    if (req.method === 'DELETE') {
      if (!cur) return send(404, status(404, 'NotFound', `deployments.apps "${name}" not found`));
      this.deployments.delete(key);
      cur.metadata.resourceVersion = String(++this.rv);
      this.emit(ns, 'DELETED', cur);
      return send(200, clone(cur));
    }
    return send(405, status(405, 'MethodNotAllowed', `${req.method} is not supported by this test server`));
  }

  private invalid(d: Obj): string | null {
    const spec = d.spec;
    if (!spec?.selector) return 'spec.selector: Required value';
    if (!spec.template?.spec?.containers?.length) return 'spec.template.spec.containers: Required value';
    if (spec.replicas !== undefined && (!Number.isInteger(spec.replicas) || spec.replicas < 0))
      return 'spec.replicas: Invalid value: must be greater than or equal to 0';
    return null;
  }

  private create(ns: string, d: Obj): Obj {
    const obj: Obj = {
      ...d,
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: {
        ...d.metadata,
        namespace: ns,
        uid: `uid-${this.rv}`,
        creationTimestamp: new Date().toISOString(),
        generation: 1,
        resourceVersion: String(++this.rv),
      },
      spec: { replicas: 1, ...d.spec },
      status: { observedGeneration: 0, replicas: 0, readyReplicas: 0 },
    };
    this.deployments.set(`${ns}/${d.metadata.name}`, obj);
    this.emit(ns, 'ADDED', obj);
    this.kubelet();
    return clone(obj);
  }

  /** The controller and kubelet: after readyDelayMs, each Deployment's status follows its spec and node. */
  private kubelet(): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      for (const [key, d] of this.deployments) {
        const nodeName = d.spec?.template?.spec?.nodeName;
        const node = nodeName ? this.nodes.get(nodeName) : undefined;
        const up = (node?.status?.conditions as { type: string; status: string }[] | undefined)?.some(
          (c) => c.type === 'Ready' && c.status === 'True',
        );
        const want = d.spec?.replicas ?? 1;
        const next = {
          observedGeneration: d.metadata.generation,
          replicas: want,
          readyReplicas: up ? want : 0,
          availableReplicas: up ? want : 0,
        };
        if (JSON.stringify(next) === JSON.stringify(d.status)) continue;
        d.status = next;
        d.metadata.resourceVersion = String(++this.rv);
        this.emit(key.split('/')[0], 'MODIFIED', d);
      }
      if (this.timers.size === 0) for (const r of this.settledWaiters.splice(0)) r();
    }, this.readyDelayMs);
    this.timers.add(t);
  }

  private emit(ns: string, type: WatchEvent['type'], obj: Obj): void {
    const ev: WatchEvent = { rv: Number(obj.metadata.resourceVersion), ns, type, object: clone(obj) };
    this.history.push(ev);
    if (this.silenced) return;
    for (const w of this.watchers)
      if (w.ns === ns && matches(obj.metadata.labels, w.selector)) w.res.write(JSON.stringify({ type, object: ev.object }) + '\n');
  }

  private watch(ns: string, selector: string | null, rvParam: string | null, req: http.IncomingMessage, res: http.ServerResponse): void {
    this.requests.push({ method: 'WATCH', path: req.url ?? '', status: 200 });
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const since = rvParam ? Number(rvParam) : null;
    if (since !== null && since < this.oldestRv) {
      res.write(
        JSON.stringify({ type: 'ERROR', object: status(410, 'Expired', `too old resource version: ${since} (${this.oldestRv})`) }) + '\n',
      );
      res.end();
      return;
    }
    if (since === null) {
      for (const d of this.listDeployments(ns))
        if (matches(d.metadata.labels, selector)) res.write(JSON.stringify({ type: 'ADDED', object: d }) + '\n');
    } else {
      for (const ev of this.history)
        if (ev.rv > since && ev.ns === ns && matches(ev.object.metadata.labels, selector))
          res.write(JSON.stringify({ type: ev.type, object: ev.object }) + '\n');
    }
    const w = { ns, selector, res };
    this.watchers.add(w);
    res.on('close', () => this.watchers.delete(w));
  }
}
