/**
 * Fault injection (the model: shared/faults.ts): a node fails at startS for durationS seconds. Failure times come from a rate
 * (Poisson per node) or from the real `softerror` events of Alibaba's v2017_server_event.csv.
 *
 * Real event times: the events' timestamps are shifted so that the first one is at 0 and scaled so
 * that the span of the events covers the episode (a trace of a day maps onto an episode of minutes);
 * each event's machine id is hashed onto an edge node. Rows other than `softerror`/`harderror` are ignored.
 */
import * as fs from 'fs';
import { UsageError } from '../../shared/errors';
import { Rng, hashString } from '../../shared/rng';
import type { Fault } from '../../shared/faults';

/** The one fault model of the simulator and the emulated cluster (shared/faults.ts). */
export type { Fault };

/** Poisson failures: each node fails at `ratePerNodePerS`, each failure lasting durationS. */
export function faultsFromRate(numNodes: number, episodeS: number, ratePerNodePerS: number, durationS: number, seed: number): Fault[] {
  const rng = Rng.derive(seed, 'faults');
  const out: Fault[] = [];
  if (ratePerNodePerS <= 0) return out;
  for (let n = 0; n < numNodes; n++) {
    let t = rng.exp(ratePerNodePerS);
    while (t < episodeS) {
      out.push({ node: n, startS: t, durationS });
      t += durationS + rng.exp(ratePerNodePerS);
    }
  }
  return out.sort((a, b) => a.startS - b.startS || a.node - b.node);
}

/** Failures at the real event times of a v2017 server_event CSV. */
export function faultsFromServerEvents(file: string, numNodes: number, episodeS: number, durationS: number): Fault[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new UsageError(`--fault-events: cannot read ${file}: ${(e as NodeJS.ErrnoException).code ?? String(e)}`);
  }
  const events: { ts: number; machine: string }[] = [];
  const lines = text.split('\n');
  for (let li = 0; li < lines.length; li++) {
    const line = lines[li].trim();
    if (!line) continue;
    const f = line.split(',');
    if (f.length < 3) throw new UsageError(`${file}: line ${li + 1}: expected at least 3 columns, got ${f.length}`);
    const ts = Number(f[0]);
    if (!Number.isFinite(ts)) throw new UsageError(`${file}: line ${li + 1}: timestamp "${f[0]}" is not a number`);
    if (f[2] === 'softerror' || f[2] === 'harderror') events.push({ ts, machine: f[1] });
  }
  if (events.length === 0) throw new UsageError(`${file}: no softerror or harderror events`);
  events.sort((a, b) => a.ts - b.ts || (a.machine < b.machine ? -1 : 1));
  const t0 = events[0].ts;
  const span = Math.max(1, events[events.length - 1].ts - t0);
  // leave the last durationS of the episode so the last failure is seen whole
  const scale = Math.max(0, episodeS - durationS) / span;
  return events.map((e) => ({ node: hashString(e.machine) % numNodes, startS: (e.ts - t0) * scale, durationS }));
}
