/**
 * What `kais status` (orchestrator/admin-cli.ts) and the dashboard (orchestrator/dashboard.ts) say
 * about a running orchestrator's safe learning, from its status (GET /v1/status's fields): one text
 * for both, so the terminal and the page never word a canary or a verdict differently.
 */
import { CONTROL } from './admin-api';
import { perEapText } from './canary';

/** Text from the server made safe for a terminal: one line, control characters (admin-api's CONTROL) shown as '?'. */
const CONTROL_ALL = new RegExp(CONTROL.source, 'g');
export const oneLine = (t: string): string => t.replace(CONTROL_ALL, '?');

const isObject = (x: unknown): x is Record<string, unknown> => typeof x === 'object' && x !== null && !Array.isArray(x);
const num = (x: unknown): string => (typeof x === 'number' && Number.isFinite(x) ? String(x) : '-');
const at = (ms: unknown): string => (typeof ms === 'number' && Number.isFinite(ms) ? new Date(ms).toISOString() : '-');
const plural = (n: unknown, one: string, many = `${one}s`): string => `${num(n)} ${n === 1 ? one : many}`;

/**
 * What the online learner, the weight gate and the canary are doing (GET /v1/status's learner, gate,
 * canary and rejectedVersions): a line each when it is on, nothing for what is off. Read defensively:
 * an orchestrator of another build may lack a field. `kais status` prints them below its table, the
 * dashboard in its safe-learning panel (the same words in both places).
 */
export function safeLearningLines(s: Record<string, unknown>): string[] {
  const out: string[] = [];
  const l = s.learner;
  if (isObject(l)) {
    out.push(
      `learner: ${plural(l.transitionsRead, 'transition')} read, ${plural(l.updates, 'update')}, ${plural(l.published, 'version')} published`,
    );
    const f = l.frozen;
    if (isObject(f))
      out.push(
        `learner: frozen by ${oneLine(String(f.by))} since ${at(f.sinceMs)}: ${oneLine(String(f.reason))} (kais weights --unfreeze)`,
      );
  }
  const g = s.gate;
  if (isObject(g)) {
    const recent = Array.isArray(g.recent) ? g.recent.filter(isObject) : [];
    const last = recent[0];
    out.push(
      `gate: ${num(g.passed)} passed, ${num(g.rejected)} rejected` +
        (last ? `; last: v${num(last.candidate)} ${last.pass === true ? 'passed' : 'rejected'}: ${oneLine(String(last.reason))}` : ''),
    );
  }
  const c = s.canary;
  if (isObject(c)) {
    const r = c.running;
    const w = c.waiting;
    const maxWindows = isObject(c.config) ? num(c.config.maxWindows) : '-';
    if (isObject(r)) {
      const eaps = Array.isArray(r.eaps) ? r.eaps.map(num).join(', ') : '-';
      out.push(
        `canary: v${num(r.version)} on eAPs ${eaps} since ${at(r.startedMs)}, ${num(r.windows)} of ${maxWindows} windows judged: ${
          typeof r.last === 'string' ? oneLine(r.last) : 'no window judged yet'
        }`,
      );
      // the rows the canary's perEap gives (well-formed ones only), in the verdicts' wording
      const finite = (x: unknown): x is number => typeof x === 'number' && Number.isFinite(x);
      const rows = (Array.isArray(r.perEap) ? r.perEap.filter(isObject) : [])
        .filter((x) => finite(x.eap) && finite(x.requests) && finite(x.inDeadline))
        .map((x) => ({
          eap: x.eap as number,
          canary: x.canary === true,
          requests: x.requests as number,
          inDeadline: x.inDeadline as number,
        }));
      if (rows.length > 0) out.push(`  ${perEapText(rows)}`);
    } else if (isObject(w)) {
      // waitsFor: since session 53 (an orchestrator before it waited only for a baseline under the main actor)
      const what = typeof w.waitsFor === 'string' ? oneLine(w.waitsFor) : 'a baseline under the main actor';
      out.push(`canary: a ${oneLine(String(w.source))} version waits for ${what} (since ${at(w.sinceMs)})`);
    } else {
      out.push(
        `canary: none running (good version v${num(c.goodVersion)}; ${num(c.promoted)} promoted, ${num(c.rolledBack)} rolled back, ${num(c.superseded)} superseded)`,
      );
    }
    const verdict = Array.isArray(c.recent) ? c.recent.filter(isObject)[0] : undefined;
    if (verdict)
      out.push(`canary: last verdict: v${num(verdict.version)} ${oneLine(String(verdict.decision))}: ${oneLine(String(verdict.reason))}`);
  }
  out.push(...storedLine(s));
  const rejected = Array.isArray(s.rejectedVersions) ? s.rejectedVersions.filter(isObject).slice(0, 3) : [];
  // the source in brackets, then its reason: an admin's reason names who ("by alice: ...")
  for (const x of rejected) out.push(`rejected: v${num(x.version)} (${oneLine(String(x.source))}): ${oneLine(String(x.reason))}`);
  return out;
}

/**
 * The stored versions an operator can roll back to (the status' storedVersions, newest first), when
 * there are two or more (one: nothing to go back to); nothing from an older orchestrator.
 */
function storedLine(s: Record<string, unknown>): string[] {
  const rows = (Array.isArray(s.storedVersions) ? s.storedVersions : []).filter(
    (x): x is { version: number; createdMs: unknown; rejectedBy: unknown } => isObject(x) && Number.isInteger(x.version),
  );
  if (rows.length < 2) return [];
  const one = (x: { version: number; createdMs: unknown; rejectedBy: unknown }) =>
    `v${x.version} ${typeof x.createdMs === 'number' && Number.isFinite(x.createdMs) ? new Date(x.createdMs).toISOString().slice(11, 19) : '-'}${
      typeof x.rejectedBy === 'string' ? ` (rejected by the ${oneLine(x.rejectedBy)})` : ''
    }`;
  return [`stored (newest first, UTC): ${rows.map(one).join(', ')}`];
}
