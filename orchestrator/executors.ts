/**
 * The live orchestrator's executors (the interface and its rules: shared/orchestration/executor.ts;
 * the simulator's is training/sim/executor.ts):
 * - `EmulatedExecutor` drives `kais node`'s admin server over HTTP: `POST /scale` carries out the
 *   orders, `GET /state` reports the cluster and its statistics since it started (the window of a
 *   step is the difference of two reports), `GET /placement` the table;
 * - `NullExecutor` has no cluster: it observes nothing and carries out nothing (the loop then only
 *   publishes placement frames);
 * - a Kubernetes executor (issue 19) implements `LiveExecutor` on a real cluster.
 */
import type { Placement, ScaleOp } from '../shared/domain';
import type { ClusterReport, OrchestrationExecutor, ScaleReport } from '../shared/orchestration/executor';
import { ReportView, windowSince, type WindowReport } from '../shared/orchestration/executor';
import type { OrchestrationView } from '../shared/policy';
import type { Scenario } from '../shared/scenario';

export interface LiveExecutor extends OrchestrationExecutor {
  observe(options?: { keepWindow?: boolean }): Promise<OrchestrationView | null>;
  apply(ops: readonly ScaleOp[]): Promise<ScaleReport>;
  /** The replica table the cluster holds now, d[w][n]; null without a cluster. */
  placement(): Promise<Placement | null>;
}

export class NullExecutor implements LiveExecutor {
  async observe(): Promise<OrchestrationView | null> {
    return null;
  }
  async apply(ops: readonly ScaleOp[]): Promise<ScaleReport> {
    return { executed: [], refused: ops.length };
  }
  async placement(): Promise<Placement | null> {
    return null;
  }
}

export class EmulatedExecutor implements LiveExecutor {
  /** The statistics of the previous report (the next window starts there). */
  private last: WindowReport | null = null;

  constructor(
    readonly adminUrl: string,
    private readonly scenario: Scenario,
    /** The device-filter verdict the orchestrator holds per target. @defaultValue every target healthy */
    private readonly healthy: (target: number) => boolean = () => true,
    private readonly timeoutMs = 5000,
    /** The node admin server's token (kais node prints it as adminToken), sent with every change. */
    private readonly adminToken: string | null = null,
  ) {}

  async observe(options: { keepWindow?: boolean } = {}): Promise<OrchestrationView | null> {
    const r = await fetch(`${this.adminUrl}/state`, { signal: AbortSignal.timeout(this.timeoutMs) });
    if (!r.ok) throw new Error(`executor: GET /state answered ${r.status} ${await r.text()}`);
    const report = (await r.json()) as ClusterReport;
    const totals = report.window;
    report.window = windowSince(this.last, totals);
    if (!options.keepWindow) this.last = totals;
    return new ReportView(this.scenario, report, this.healthy);
  }

  async apply(ops: readonly ScaleOp[]): Promise<ScaleReport> {
    if (ops.length === 0) return { executed: [], refused: 0 };
    const headers: Record<string, string> = this.adminToken ? { authorization: `Bearer ${this.adminToken}` } : {};
    const r = await fetch(`${this.adminUrl}/scale`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ ops }),
      signal: AbortSignal.timeout(this.timeoutMs),
    });
    if (!r.ok) throw new Error(`executor: POST /scale answered ${r.status} ${await r.text()}`);
    return (await r.json()) as ScaleReport;
  }

  async placement(): Promise<Placement | null> {
    const r = await fetch(`${this.adminUrl}/placement`, { signal: AbortSignal.timeout(this.timeoutMs) });
    if (!r.ok) throw new Error(`executor: GET /placement answered ${r.status} ${await r.text()}`);
    return ((await r.json()) as { d: Placement }).d;
  }
}
