/**
 * Reading /metrics in tests with a real Prometheus text-format parser (parse-prometheus-text-format),
 * not regular expressions: label order and formatting are the exporter's business.
 */
import parsePrometheus from 'parse-prometheus-text-format';

export interface Family {
  name: string;
  type: string;
  metrics: { value?: string; labels?: Record<string, string>; buckets?: Record<string, string>; count?: string; sum?: string }[];
}

export function parseMetrics(text: string): Family[] {
  return parsePrometheus(text) as Family[];
}

/**
 * The value of one sample (labels must all match), or undefined. Histograms: their count, read as
 * the +Inf bucket (this parser keeps a histogram's buckets but not its labels or _count line).
 */
export function sample(families: Family[], name: string, labels: Record<string, string> = {}): number | undefined {
  const f = families.find((x) => x.name === name);
  if (!f) return undefined;
  const m = f.metrics.find((x) => (f.type === 'HISTOGRAM' && !x.labels) || Object.entries(labels).every(([k, v]) => x.labels?.[k] === v));
  if (!m) return undefined;
  return Number(m.value ?? m.count ?? m.buckets?.['+Inf']);
}

/** Every counter sample as name{labels} -> value. */
export function counters(families: Family[]): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of families) {
    if (f.type !== 'COUNTER') continue;
    for (const m of f.metrics) {
      const key = `${f.name}{${Object.entries(m.labels ?? {})
        .sort()
        .map(([k, v]) => `${k}=${v}`)
        .join(',')}}`;
      out.set(key, Number(m.value));
    }
  }
  return out;
}
