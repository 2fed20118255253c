/**
 * prom-client metrics whose value is read at scrape time from the process's own figures (counts
 * that only grow, for counters), so no code path has to remember to increment them. Used by the
 * agent's and the orchestrator's /metrics (agent/metrics.ts, orchestrator/http.ts).
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** A counter set, at each scrape, to what `read` returns per label set (read from monotonic counts). */
export function scrapedCounter<L extends string>(
  registry: Registry,
  name: string,
  help: string,
  labelNames: L[],
  read: () => [Partial<Record<L, string>>, number][],
): Counter<L> {
  return new Counter<L>({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, v] of read()) this.inc(labels as Record<L, string>, v);
    },
  });
}

/** A gauge set, at each scrape, to `read()`. */
export function scrapedGauge(registry: Registry, name: string, help: string, read: () => number): Gauge {
  return new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}
