/**
 * The Kubernetes executor (issue 19): the live orchestrator's scale orders carried out on a real
 * cluster through its API server, with `@kubernetes/client-node` (the interface and its rules:
 * shared/orchestration/executor.ts; the emulated cluster's executor: orchestrator/executors.ts).
 *
 * What it writes and reads (docs/kubernetes.md):
 * - scenario edge node n is the Kubernetes Node labelled `kais.io/node-index=<n>` (the label is
 *   configurable); a node that is missing, NotReady or cordoned is failed: no replica is created
 *   there (its Deployments are left as they are and come back with the node);
 * - the replicas of service w on node n are one Deployment `kais-w<w>-n<n>` in the configured
 *   namespace, pinned by `spec.template.spec.nodeName`, `spec.replicas` = the placement, labelled
 *   `app.kubernetes.io/managed-by=kais`, `kais.io/service=<w>`, `kais.io/node-index=<n>`;
 * - reconcile is get -> create (404) or replace with the read `resourceVersion` (optimistic
 *   concurrency): a 409 (someone wrote in between, or created it first) reads again and retries;
 *   429 (after its Retry-After), 500, 502, 503, 504 and network errors back off (doubling, capped)
 *   and retry; past the attempt budget the orders on that Deployment are refused and the loop's
 *   placement stays what the cluster holds;
 * - it never writes, scales or deletes an object without its managed-by label: a Deployment of
 *   the same name that it did not create refuses the orders on that (service, node);
 * - readiness: a watch on its own Deployments keeps `status.readyReplicas` (re-listing when the
 *   watch ends or the server answers 410 Gone); `observe()` reports ready = readyReplicas and
 *   starting = the rest of `spec.replicas`, so the placement loop sees what is really serving.
 *
 * What Kubernetes cannot tell (busy replicas, queues, per-service arrivals and work) comes from
 * `load`, a source the caller gives: the orchestrator's load board, which combines what the agents
 * report in their telemetry (orchestrator/load-board.ts). Without one those are zeros and hpa and
 * gsp-ss see no load (docs/kubernetes.md).
 *
 * `@kubernetes/client-node` 1.x is an ES module: it is loaded with a real `import()` (Node 20
 * cannot `require` it), once, when the first executor starts.
 */
import * as fs from 'node:fs';
import { UsageError } from '../shared/errors';
import type * as K8s from '@kubernetes/client-node';
import type { Placement, ScaleOp } from '../shared/domain';
import type { ClusterReport, ScaleReport, WindowReport } from '../shared/orchestration/executor';
import { ReportView, windowSince } from '../shared/orchestration/executor';
import { fitsReplica } from '../shared/orchestration/placement';
import type { OrchestrationView } from '../shared/policy';
import { capacityArrays, type Scenario } from '../shared/scenario';
import type { LiveExecutor } from './executors';
import type { LoadSource } from './load-board';

export const MANAGED_BY = 'app.kubernetes.io/managed-by';
export const MANAGER = 'kais';
export const SERVICE_LABEL = 'kais.io/service';
export const DEFAULT_NODE_LABEL = 'kais.io/node-index';

export interface KubernetesExecutorOptions {
  scenario: Scenario;
  /** A kubeconfig file; null: in-cluster (the pod's service account). */
  kubeconfig: string | null;
  /** Namespace of the Deployments. */
  namespace: string;
  /** Container image of a replica; `{service}` becomes the service index. */
  image: string;
  /** Node label whose value is the scenario's edge-node index. @defaultValue kais.io/node-index */
  nodeLabel?: string;
  /** Scenario seconds per real second (the report's clock). @defaultValue 1 */
  speed?: number;
  /** The device-filter verdict the orchestrator holds per target. @defaultValue every target healthy */
  healthy?: (target: number) => boolean;
  /**
   * Busy replicas, waiting requests and the per-service statistics since the start, from outside
   * the cluster (the load board: the agents' telemetry); zeros without.
   */
  load?: LoadSource;
  /** Attempts per Deployment write before its orders are refused. @defaultValue 8 */
  attempts?: number;
  /** First backoff (ms), doubling up to maxBackoffMs. @defaultValue 200 */
  backoffMs?: number;
  /** @defaultValue 10000 */
  maxBackoffMs?: number;
  /**
   * observe() lists again when neither the watch nor a list brought anything for this long (a
   * watch that went silent without ending); the server also ends each watch after 5 minutes
   * (timeoutSeconds), as client-go asks. @defaultValue 60000
   */
  resyncMs?: number;
  log?: (line: string) => void;
}

/** What the executor has done since it started (the tests and /metrics read it). */
export interface KubernetesExecutorStats {
  /** Deployments created, replaced (scaled). */
  created: number;
  replaced: number;
  /** 409 answers met (conflicts and AlreadyExists), each followed by a fresh read. */
  conflicts: number;
  /** Retries after 429 / 5xx / network errors. */
  backoffs: number;
  /** Orders refused because a Deployment of that name is not ours. */
  foreign: number;
  /** Watch (re)starts. */
  watches: number;
}

type K8sModule = typeof K8s;
let k8sModule: Promise<K8sModule> | null = null;

/** Loads @kubernetes/client-node (an ES module) once: require where the runtime can, else a real import(). */
export function loadKubernetesClient(): Promise<K8sModule> {
  if (!k8sModule) {
    k8sModule = (async () => {
      try {
        // eslint-disable-next-line @typescript-eslint/no-require-imports
        return require('@kubernetes/client-node') as K8sModule;
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ERR_REQUIRE_ESM') throw e;
        // tsc would turn import() into require(): keep a real one
        const esmImport = new Function('s', 'return import(s)') as (s: string) => Promise<K8sModule>;
        return esmImport('@kubernetes/client-node');
      }
    })();
  }
  return k8sModule;
}

/** The Deployment name of (service, node). */
export function deploymentName(service: number, node: number): string {
  return `kais-w${service}-n${node}`;
}

class RefusedError extends Error {}

/**
 * a is a later resourceVersion than b. Kubernetes calls them opaque; every API server in use
 * (etcd revisions) gives integers that grow, and only those are compared (anything else: not newer).
 */
function newer(a: string | undefined, b: string | undefined): boolean {
  return a !== undefined && b !== undefined && /^\d+$/.test(a) && /^\d+$/.test(b) && BigInt(a) > BigInt(b);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function statusOf(e: unknown): number | null {
  const c = (e as { code?: unknown }).code;
  return typeof c === 'number' ? c : null;
}

export class KubernetesExecutor implements LiveExecutor {
  readonly stats: KubernetesExecutorStats = { created: 0, replaced: 0, conflicts: 0, backoffs: 0, foreign: 0, watches: 0 };
  private readonly W: number;
  private readonly N: number;
  private readonly cap: ReturnType<typeof capacityArrays>;
  private readonly nodeLabel: string;
  private k8s!: K8sModule;
  private kc!: K8s.KubeConfig;
  private apps!: K8s.AppsV1Api;
  private core!: K8s.CoreV1Api;
  /** Our Deployments by name, as the last list and the watch since left them. */
  private readonly deployments = new Map<string, K8s.V1Deployment>();
  private listedRv: string | undefined;
  /** When the cache last heard from the server (a list or a watch event), performance.now() ms. */
  private heardMs = -Infinity;
  private watchAbort: AbortController | null = null;
  private closed = false;
  private readonly t0Ms = performance.now();
  private readonly listeners = new Set<() => void>();
  /** The load source's statistics at the previous observe() (the next window starts there). */
  private lastWindow: WindowReport | null = null;

  constructor(private readonly o: KubernetesExecutorOptions) {
    this.W = o.scenario.services.length;
    this.N = o.scenario.eaps.reduce((s, e) => s + e.nodes.length, 0);
    this.cap = capacityArrays(o.scenario);
    this.nodeLabel = o.nodeLabel ?? DEFAULT_NODE_LABEL;
  }

  /** Connects (kubeconfig or in-cluster), lists its Deployments and starts the readiness watch. */
  async start(): Promise<void> {
    this.k8s = await loadKubernetesClient();
    this.kc = new this.k8s.KubeConfig();
    // what the operator configured and we cannot use is one line naming the field, not a stack
    const where = this.o.kubeconfig ? `field "kubernetes.kubeconfig": ${this.o.kubeconfig}` : 'field "kubernetes" (in-cluster)';
    // in-cluster needs the pod's service environment (checked here, at start: a config is valid wherever it is read)
    if (!this.o.kubeconfig && !process.env.KUBERNETES_SERVICE_HOST)
      throw new UsageError(
        'field "kubernetes.kubeconfig" is null (in-cluster), but this process runs outside a pod (no $KUBERNETES_SERVICE_HOST): name a kubeconfig file',
      );
    try {
      if (this.o.kubeconfig) {
        if (!fs.existsSync(this.o.kubeconfig)) throw new Error('does not exist');
        this.kc.loadFromFile(this.o.kubeconfig);
      } else this.kc.loadFromCluster();
    } catch (e) {
      throw new UsageError(`${where}: not a usable kubeconfig (${String((e as Error).message).split('\n')[0]})`);
    }
    if (!this.kc.getCurrentCluster()) throw new UsageError(`${where}: names no current cluster (set current-context)`);
    this.apps = this.kc.makeApiClient(this.k8s.AppsV1Api);
    this.core = this.kc.makeApiClient(this.k8s.CoreV1Api);
    try {
      await this.relist();
    } catch (e) {
      throw new UsageError(
        `${where}: cannot list the kais Deployments in namespace ${this.o.namespace} (${String((e as Error).message).split('\n')[0]})`,
      );
    }
    void this.watch();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watchAbort?.abort();
  }

  /** Called after every change the watch sees (readiness included). */
  onChange(f: () => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  /** readyReplicas of each (service, node) as last seen, d[w][n]. */
  readyPlacement(): Placement {
    const d = this.emptyPlacement();
    for (const dep of this.deployments.values()) {
      const k = this.keyOf(dep);
      if (k) d[k.w][k.n] = dep.status?.readyReplicas ?? 0;
    }
    return d;
  }

  async placement(): Promise<Placement | null> {
    await this.relist();
    return this.specPlacement();
  }

  async observe(options: { keepWindow?: boolean } = {}): Promise<OrchestrationView | null> {
    // no live watch, or a silent one: read the state now
    if (!this.watchAbort || performance.now() - this.heardMs > (this.o.resyncMs ?? 60_000)) await this.relist();
    const nodes = await this.nodes();
    const W = this.W;
    const T = this.N + 1;
    const nowS = ((performance.now() - this.t0Ms) / 1000) * (this.o.speed ?? 1);
    const zeros = (k: number) => new Array<number>(k).fill(0);
    const load = this.o.load?.read() ?? null;
    let window: WindowReport = {
      windowS: nowS,
      arrivals: zeros(W),
      busyReplicaS: zeros(W),
      readyReplicaS: zeros(W),
      completedInTime: zeros(W),
      failed: zeros(W),
      workCoreS: zeros(W),
    };
    if (load) {
      // the source counts since its start: this window is the difference since the previous observe()
      window = windowSince(this.lastWindow, load.window);
      if (!options.keepWindow) this.lastWindow = load.window;
    }
    const r: ClusterReport = {
      nowS,
      ready: zeros(T * W),
      starting: zeros(T * W),
      draining: zeros(T * W),
      busy: load ? load.busy.slice() : zeros(T * W),
      waiting: load ? load.waiting.slice() : zeros(T * W),
      usedMemGB: zeros(T),
      freeCpuCores: Array.from(this.cap.cpu),
      failed: Array.from({ length: this.N }, (_, n) => (nodes.has(n) ? 0 : 1)),
      window,
    };
    for (const dep of this.deployments.values()) {
      const key = this.keyOf(dep);
      if (!key) continue;
      const k = key.n * W + key.w;
      const spec = dep.spec?.replicas ?? 0;
      const ready = dep.status?.readyReplicas ?? 0;
      r.ready[k] = ready;
      r.starting[k] = Math.max(0, spec - ready);
      r.draining[k] = Math.max(0, ready - spec);
      r.usedMemGB[key.n] += spec * this.cap.svcMem[key.w];
    }
    // the cloud hosts every service, as in the emulated cluster
    for (let w = 0; w < W; w++) r.ready[this.N * W + w] = Math.max(1, Math.floor(this.cap.cpu[this.N] / this.cap.svcCpu[w]));
    for (let t = 0; t < T; t++) {
      for (let w = 0; w < W; w++) {
        const k = t * W + w;
        // busy replicas are ready ones: a source ahead of the watch (or behind it) is clamped
        r.busy[k] = Math.min(r.busy[k], r.ready[k]);
        r.freeCpuCores[t] -= r.busy[k] * this.cap.svcCpu[w];
      }
      r.freeCpuCores[t] = Math.max(0, r.freeCpuCores[t]);
    }
    return new ReportView(this.o.scenario, r, this.o.healthy);
  }

  /**
   * Carries out the orders, one write per Deployment whose count changed; and re-pins a Deployment
   * whose node index moved to another Node (a replaced machine) though it got no order: its pods
   * stayed Pending on the old Node's name until one came. So it runs at every step, orders or not
   * (two list calls when there are none).
   */
  async apply(ops: readonly ScaleOp[]): Promise<ScaleReport> {
    const log = this.o.log ?? (() => undefined);
    await this.relist();
    const nodes = await this.nodes();
    const d = this.specPlacement();
    const accepted: ScaleOp[] = [];
    let refused = 0;
    for (const op of ops) {
      const { service: w, node: n } = op;
      if (w < 0 || w >= this.W || n < 0 || n >= this.N || (op.delta !== 1 && op.delta !== -1)) {
        refused++;
        continue;
      }
      if (op.delta === 1) {
        let used = 0;
        for (let v = 0; v < this.W; v++) used += d[v][n] * this.cap.svcMem[v];
        const total = d[w].reduce((s, x) => s + x, 0);
        const ok =
          nodes.has(n) &&
          fitsReplica(this.cap.cpu[n], this.cap.mem[n] - used, this.cap.svcCpu[w], this.cap.svcMem[w]) &&
          total < this.o.scenario.maxReplicasPerService;
        if (!ok) {
          refused++;
          continue;
        }
      } else if (d[w][n] <= 0) {
        refused++;
        continue;
      }
      d[w][n] += op.delta;
      accepted.push(op);
    }
    // one write per (service, node) whose count changed or whose pods are pinned to a Node that no longer holds its index
    const held = this.specPlacement();
    const failedKeys = new Set<string>();
    for (let w = 0; w < this.W; w++)
      for (let n = 0; n < this.N; n++) {
        const pin = this.deployments.get(deploymentName(w, n))?.spec?.template?.spec?.nodeName;
        const moved = d[w][n] > 0 && nodes.has(n) && pin !== undefined && pin !== nodes.get(n);
        if (d[w][n] === held[w][n] && !moved) continue;
        try {
          await this.reconcile(w, n, d[w][n], nodes.get(n) ?? null);
        } catch (e) {
          failedKeys.add(`${w}/${n}`);
          if (e instanceof RefusedError) this.stats.foreign++;
          log(`kubernetes: ${deploymentName(w, n)} left at ${held[w][n]} replica(s): ${(e as Error).message}`);
        }
      }
    const executed = accepted.filter((op) => !failedKeys.has(`${op.service}/${op.node}`));
    refused += accepted.length - executed.length;
    return { executed, refused };
  }

  /** Brings Deployment (w, n) to `replicas`: get -> create or replace, retried on conflicts and API errors. */
  private async reconcile(w: number, n: number, replicas: number, nodeName: string | null): Promise<void> {
    const name = deploymentName(w, n);
    const namespace = this.o.namespace;
    await this.retrying(`${name}`, async () => {
      let cur: K8s.V1Deployment | null = null;
      try {
        cur = await this.apps.readNamespacedDeployment({ name, namespace });
      } catch (e) {
        if (statusOf(e) !== 404) throw e;
      }
      if (!cur) {
        if (!nodeName) throw new RefusedError(`node ${n} is not in the cluster`);
        const made = await this.apps.createNamespacedDeployment({ namespace, body: this.manifest(w, n, replicas, nodeName) });
        this.stats.created++;
        this.remember(made);
        return;
      }
      if (cur.metadata?.labels?.[MANAGED_BY] !== MANAGER) throw new RefusedError(`a Deployment ${name} exists that kais did not create`);
      // the node index may have moved to another Node (a replaced machine): the pods follow it, else
      // they stayed Pending on the old name for good
      const template = cur.spec?.template;
      const repin = nodeName !== null && template?.spec !== undefined && template.spec.nodeName !== nodeName;
      if (cur.spec?.replicas === replicas && !repin) return void this.remember(cur);
      const spec = { ...cur.spec!, replicas };
      if (repin) spec.template = { ...template, spec: { ...template.spec!, nodeName } };
      const body = { ...cur, spec };
      const put = await this.apps.replaceNamespacedDeployment({ name, namespace, body });
      this.stats.replaced++;
      this.remember(put);
    });
  }

  /** The object kais writes for (w, n). */
  manifest(w: number, n: number, replicas: number, nodeName: string): K8s.V1Deployment {
    const labels = {
      [MANAGED_BY]: MANAGER,
      'app.kubernetes.io/name': 'kais-service',
      [SERVICE_LABEL]: String(w),
      [this.nodeLabel]: String(n),
    };
    const memMi = Math.round(this.cap.svcMem[w] * 1024);
    const cpuM = Math.round(this.cap.svcCpu[w] * 1000);
    return {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: deploymentName(w, n), namespace: this.o.namespace, labels },
      spec: {
        replicas,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            nodeName,
            containers: [
              {
                name: 'service',
                image: this.o.image.replaceAll('{service}', String(w)),
                env: [
                  { name: 'KAIS_SERVICE', value: String(w) },
                  { name: 'KAIS_NODE', value: String(n) },
                ],
                resources: { requests: { cpu: `${cpuM}m`, memory: `${memMi}Mi` }, limits: { memory: `${memMi}Mi` } },
              },
            ],
          },
        },
      },
    };
  }

  /** Runs f, retrying 409 at once (after a fresh read inside f) and 429 / 5xx / network errors after a backoff. */
  private async retrying(what: string, f: () => Promise<void>): Promise<void> {
    const attempts = this.o.attempts ?? 8;
    let wait = this.o.backoffMs ?? 200;
    const maxWait = this.o.maxBackoffMs ?? 10_000;
    for (let i = 1; ; i++) {
      try {
        return await f();
      } catch (e) {
        if (e instanceof RefusedError) throw e;
        const code = statusOf(e);
        const retryable = code === null || code === 409 || code === 429 || code >= 500;
        if (!retryable || i >= attempts || this.closed)
          throw new Error(`${what}: ${code ?? ''} ${(e as Error).message}`.trim(), { cause: e });
        if (code === 409) {
          this.stats.conflicts++;
          continue;
        }
        this.stats.backoffs++;
        const after = Number((e as { headers?: Record<string, string> }).headers?.['retry-after']);
        // a 429's Retry-After is the server's word (up to a minute), else the doubling backoff
        await sleep(code === 429 && after > 0 ? Math.min(60_000, Math.max(wait, after * 1000)) : wait);
        wait = Math.min(maxWait, wait * 2);
      }
    }
  }

  /** Scenario node index -> Node name, for the nodes that can run replicas (Ready, schedulable). */
  private async nodes(): Promise<Map<number, string>> {
    const list = await this.withRetry('list nodes', () => this.core.listNode({ labelSelector: this.nodeLabel }));
    const out = new Map<number, string>();
    for (const node of list.items) {
      const idx = Number(node.metadata?.labels?.[this.nodeLabel]);
      if (!Number.isInteger(idx) || idx < 0 || idx >= this.N || !node.metadata?.name) continue;
      const ready = node.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
      if (ready && !node.spec?.unschedulable) out.set(idx, node.metadata.name);
    }
    return out;
  }

  private async withRetry<T>(what: string, f: () => Promise<T>): Promise<T> {
    let out!: T;
    await this.retrying(what, async () => void (out = await f()));
    return out;
  }

  private async relist(): Promise<void> {
    const list = await this.withRetry('list deployments', () =>
      this.apps.listNamespacedDeployment({ namespace: this.o.namespace, labelSelector: `${MANAGED_BY}=${MANAGER}` }),
    );
    // a watch event may have arrived while the list was on the wire: keep what is newer than the list
    const listRv = list.metadata?.resourceVersion;
    const names = new Set(list.items.map((d) => d.metadata?.name));
    for (const [name, d] of this.deployments)
      if (!names.has(name) && !newer(d.metadata?.resourceVersion, listRv)) this.deployments.delete(name);
    for (const d of list.items) this.remember(d);
    if (!newer(this.listedRv, listRv)) this.listedRv = listRv;
    this.heardMs = performance.now();
  }

  /** Keeps the readiness watch running until close(): re-lists and re-watches when it ends. */
  private async watch(): Promise<void> {
    const log = this.o.log ?? (() => undefined);
    const watcher = new this.k8s.Watch(this.kc);
    let wait = this.o.backoffMs ?? 200;
    while (!this.closed) {
      const ended = new Promise<unknown>((resolve) => {
        this.stats.watches++;
        watcher
          .watch(
            `/apis/apps/v1/namespaces/${this.o.namespace}/deployments`,
            { labelSelector: `${MANAGED_BY}=${MANAGER}`, resourceVersion: this.listedRv, allowWatchBookmarks: true, timeoutSeconds: 300 },
            (type: string, obj: K8s.V1Deployment & { code?: number }) => {
              if (type === 'ERROR') {
                this.watchAbort?.abort(); // 410 Gone and the like: list again
                return;
              }
              if (obj.metadata?.resourceVersion) this.listedRv = obj.metadata.resourceVersion;
              this.heardMs = performance.now();
              if (type === 'BOOKMARK') return;
              if (type === 'DELETED') this.deployments.delete(obj.metadata?.name ?? '');
              else this.remember(obj);
              wait = this.o.backoffMs ?? 200;
              for (const f of this.listeners) f();
            },
            resolve,
          )
          .then(
            (abort) => (this.watchAbort = abort),
            (e) => resolve(e),
          );
      });
      const err = await ended;
      this.watchAbort = null;
      if (this.closed) return;
      if (err) log(`kubernetes: watch ended (${(err as Error).message ?? err}); listing again`);
      await sleep(wait);
      wait = Math.min(this.o.maxBackoffMs ?? 10_000, wait * 2);
      try {
        await this.relist();
        for (const f of this.listeners) f();
      } catch (e) {
        log(`kubernetes: list failed (${(e as Error).message})`);
      }
    }
  }

  /** Keeps dep unless the cache holds a newer version of it. */
  private remember(dep: K8s.V1Deployment): void {
    const name = dep.metadata?.name;
    if (dep.metadata?.labels?.[MANAGED_BY] !== MANAGER || !name) return;
    if (newer(this.deployments.get(name)?.metadata?.resourceVersion, dep.metadata.resourceVersion)) return;
    this.deployments.set(name, dep);
  }

  private keyOf(dep: K8s.V1Deployment): { w: number; n: number } | null {
    const m = /^kais-w(\d+)-n(\d+)$/.exec(dep.metadata?.name ?? '');
    if (!m) return null;
    const w = Number(m[1]);
    const n = Number(m[2]);
    return w < this.W && n < this.N ? { w, n } : null;
  }

  private emptyPlacement(): Placement {
    return Array.from({ length: this.W }, () => new Array<number>(this.N).fill(0));
  }

  private specPlacement(): Placement {
    const d = this.emptyPlacement();
    for (const dep of this.deployments.values()) {
      const k = this.keyOf(dep);
      if (k) d[k.w][k.n] = dep.spec?.replicas ?? 0;
    }
    return d;
  }
}
