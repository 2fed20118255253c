/**
 * `kais status`, `kais scale`, `kais nodes` and `kais weights`: the admin's commands against a running
 * orchestrator's admin API (orchestrator/admin-api.ts), following the other commands'
 * conventions: one option spec each, `--json` for the API's answer as is, exit 2 with one line
 * naming the flag for bad input, an unreachable orchestrator or a refused token.
 *
 * The orchestrator's HTTP URL is its ready line's `httpPort` (`kais up` prints it); the token is
 * the config's `adminToken`, from `--admin-token-file` or $KAIS_ADMIN_TOKEN.
 */
import * as http from 'node:http';
import * as https from 'node:https';
import { loadCa } from '../shared/tls';
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, resolveOptions, yargsOptions } from '../shared/config';
import { UsageError } from '../shared/errors';
import { resolveSecret } from '../shared/lifecycle';
import { oneLine, safeLearningLines } from './status-lines';

export const ADMIN_TOKEN_ENV = 'KAIS_ADMIN_TOKEN';

const COMMON = {
  orchestrator: opt.url(['http:', 'https:'], {
    demand: true,
    describe: "the orchestrator's HTTP port, e.g. http://127.0.0.1:7001 (its ready line's httpPort; https:// when it has a certificate)",
  }),
  tlsCa: opt.file({ describe: "CA certificate (PEM) an https:// orchestrator's certificate must chain to (default: Node's CA store)" }),
  adminTokenFile: opt.secretFile({ describe: `file whose first line is the orchestrator's adminToken (default: $${ADMIN_TOKEN_ENV})` }),
  json: opt.boolean({ default: false, describe: "print the API's JSON answer" }),
};

interface Common {
  orchestrator: string;
  tlsCa?: string;
  adminTokenFile?: string;
  json: boolean;
}

/** The flag that carried each field of a change's body (the API's refusals name the field). */
const FIELD_FLAGS: Record<string, string> = {
  service: '--service',
  replicas: '--replicas',
  node: '--node',
  reason: '--reason',
  by: '--by',
  ttlS: '--ttl',
  to: '--to',
};

/**
 * One call of the admin API; its refusals are the user's (exit 2, one line naming the flag: `flags`
 * overrides FIELD_FLAGS for this command, `notFound` names the flag of a 404 about the thing named,
 * a service with no override or a node not held). A change saved that the cluster did not take
 * (502), or not made because the store could not keep it (503), is one line and exit 1, and its
 * answer (the status as it stands) is returned.
 */
async function call(
  a: Common,
  method: string,
  path: string,
  body?: unknown,
  names: { flags?: Record<string, string>; notFound?: string } = {},
): Promise<Record<string, unknown>> {
  const token = resolveSecret({
    fromFile: a.adminTokenFile,
    fileFlag: 'admin-token-file',
    inlineFlag: 'admin-token-file',
    env: ADMIN_TOKEN_ENV,
  });
  if (token === '') throw new UsageError(`--admin-token-file: no admin token (give the file, or set $${ADMIN_TOKEN_ENV})`);
  const url = new URL(path, a.orchestrator);
  const ca = a.tlsCa !== undefined ? loadCa(a.tlsCa, '--tls-ca') : undefined;
  if (ca !== undefined && url.protocol !== 'https:')
    throw new UsageError(`--tls-ca: the orchestrator URL ${a.orchestrator} is not https://`);
  const request = url.protocol === 'https:' ? https.request : http.request;
  const text = body === undefined ? '' : JSON.stringify(body);
  const notKais = (what: string) =>
    new UsageError(`--orchestrator ${a.orchestrator}: answered ${what} (not a kais orchestrator's HTTP port?)`);
  const reply = await new Promise<{ status: number; body: Record<string, unknown> }>((resolve, reject) => {
    // one deadline for the whole exchange (a server that trickles a byte at a time does not reset it)
    const deadline = setTimeout(() => req.destroy(new Error(`no whole answer in ${ANSWER_DEADLINE_MS / 1000} s`)), ANSWER_DEADLINE_MS);
    const settle = (f: () => void) => {
      clearTimeout(deadline);
      f();
    };
    const req = request(
      url,
      {
        method,
        agent: false,
        ...(ca !== undefined ? { ca } : {}),
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        let ended = false;
        res.on('data', (c: Buffer) => {
          size += c.length;
          if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`an answer over ${MAX_ANSWER_BYTES} bytes`));
          else chunks.push(c);
        });
        res.on('end', () => {
          ended = true;
          let body: unknown;
          try {
            body = size > 0 ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {};
          } catch {
            return settle(() => reject(notKais('something that is not JSON')));
          }
          if (typeof body !== 'object' || body === null || Array.isArray(body))
            return settle(() => reject(notKais('JSON that is not an object')));
          settle(() => resolve({ status: res.statusCode ?? 0, body: body as Record<string, unknown> }));
        });
        // the connection closed before the whole answer: never a silent success
        res.on('close', () => {
          if (!ended)
            settle(() => reject(new UsageError(`--orchestrator ${a.orchestrator}: the connection closed before the whole answer`)));
        });
      },
    );
    req.on('error', (e) =>
      settle(() =>
        reject(e instanceof UsageError ? e : new UsageError(`--orchestrator ${a.orchestrator}: cannot reach it (${e.message})`)),
      ),
    );
    req.end(text);
  });
  const reason = typeof reply.body.reason === 'string' ? oneLine(reply.body.reason) : `HTTP ${reply.status}`;
  if (reply.status === 401) throw new UsageError('--admin-token-file: the orchestrator refused the admin token');
  if (reply.status === 403) throw new UsageError(`--orchestrator: ${reason}`);
  if ((reply.status === 502 || reply.status === 503) && typeof reply.body.message === 'string') {
    process.stderr.write(`kais: ${oneLine(String(reply.body.message))}: ${reason}\n`);
    process.exitCode = 1;
    return reply.body;
  }
  if (reply.status === 404 && names.notFound && /^(service \d+ has no override|node \d+ is not held)$/.test(reason))
    throw new UsageError(`${names.notFound}: ${reason}`);
  // the CLI calls only routes the API has: any other 404/405 is another server on that port
  if (reply.status === 404 || reply.status === 405)
    throw new UsageError(`--orchestrator ${a.orchestrator}: ${reason} (not a kais orchestrator's HTTP port?)`);
  // the API names its body fields (replicas: ..., ttlS: ...): the line names the flag that carried it
  if (reply.status >= 400)
    throw new UsageError(
      reason.replace(/^(service|replicas|node|reason|by|ttlS|to):/, (_m, f: string) => `${names.flags?.[f] ?? FIELD_FLAGS[f]}:`),
    );
  if (reply.status === 202 && typeof reply.body.message === 'string') return reply.body; // saved, still being applied
  if (reply.status !== 200) throw notKais(`HTTP ${reply.status}`);
  return reply.body;
}

/** A change's answer: how many of its orders the cluster refused (no room, say), when any; or that it is still being applied. */
function refusedNote(r: Record<string, unknown>, open = '; ', close = ''): string {
  if (r.pending === true) return `${open}saved; the cluster is still applying it: see kais status${close}`;
  const applied = r.applied as { refused?: unknown } | undefined;
  const n = applied && Number.isInteger(applied.refused) ? (applied.refused as number) : 0;
  // the store could not keep the placement (disk full): the change acted, but an operator must know
  const unstored = typeof r.warning === 'string' ? `${open}${oneLine(r.warning)}${close}` : '';
  return (n > 0 ? `${open}the cluster refused ${n} order(s): see kais status${close}` : '') + unstored;
}

/** The whole exchange with the orchestrator, and the largest answer read (a status of a large cluster is well under it). */
const ANSWER_DEADLINE_MS = 30_000;
const MAX_ANSWER_BYTES = 16 * 1048576;

/** A status answer (GET /v1/status, and the answers of the changes), checked before it is printed. */
function asStatus(a: Common, s: Record<string, unknown>): Record<string, unknown> {
  const ok =
    Array.isArray(s.placement) &&
    s.placement.every((row) => Array.isArray(row) && row.every((x) => Number.isInteger(x))) &&
    Array.isArray(s.agents) &&
    Array.isArray(s.overrides) &&
    Array.isArray(s.holds);
  if (!ok) throw new UsageError(`--orchestrator ${a.orchestrator}: answered JSON that is not a kais status`);
  return s;
}

function table(rows: (string | number)[][]): string {
  const widths = rows[0].map((_, i) => Math.max(...rows.map((r) => String(r[i]).length)));
  return rows.map((r) => r.map((c, i) => String(c).padEnd(widths[i])).join('  ')).join('\n');
}

function statusText(s: Record<string, unknown>): string {
  const placement = s.placement as number[][];
  const lines = [
    `orchestration ${String(s.orchestrationRuns ?? s.orchestration)}, epoch ${String(s.epoch)}, frame ${String(s.frame)}, weights v${String(s.weightVersion ?? '-')}, placement v${String(s.placementVersion ?? '-')}${typeof s.actor === 'string' ? `, ${s.actor} actor` : ''}`,
    `agents: ${(s.agents as { eap: number; weightVersion: number | null }[]).map((a) => `eAP ${a.eap} (weights v${a.weightVersion ?? '-'})`).join(', ') || 'none'}`,
    '',
    table([
      ['service', 'replicas', 'on nodes'],
      ...placement.map((row, w) => [
        w,
        row.reduce((x, y) => x + y, 0),
        row
          .map((r, n) => (r > 0 ? `${n}x${r}` : ''))
          .filter(Boolean)
          .join(' '),
      ]),
    ]),
  ];
  for (const o of s.overrides as Record<string, unknown>[])
    lines.push(
      `override: service ${String(o.service)} -> ${String(o.replicas)}${o.node === null ? ' in total' : ` on node ${String(o.node)}`} by ${oneLine(String(o.by))}: ${oneLine(String(o.reason))}${o.untilMs ? ` (until ${new Date(o.untilMs as number).toISOString()})` : ''}`,
    );
  for (const h of s.holds as Record<string, unknown>[])
    lines.push(`held: node ${String(h.node)} by ${oneLine(String(h.by))}: ${oneLine(String(h.reason))}`);
  const safe = safeLearningLines(s);
  if (safe.length > 0) lines.push('', ...safe);
  return lines.join('\n');
}

export const STATUS_SPEC = { ...COMMON };
export const statusCommand: CommandModule<object, object> = {
  command: 'status',
  describe:
    'show a running orchestrator: agents, versions, placement per service, overrides and held nodes, and what the online learner, the weight gate and the canary do',
  builder: (y: Argv<object>) =>
    yargsOptions(y.example(`${ADMIN_TOKEN_ENV}=... $0 status --orchestrator http://127.0.0.1:7001`, 'the table'), STATUS_SPEC),
  handler: namingFlags(STATUS_SPEC, async (argv) => {
    const a = resolveOptions(STATUS_SPEC, argv);
    const s = asStatus(a, await call(a, 'GET', '/v1/status'));
    process.stdout.write(a.json ? `${JSON.stringify(s)}\n` : `${statusText(s)}\n`);
  }),
};

export const SCALE_SPEC = {
  ...COMMON,
  service: opt.integer({ demand: true, min: 0, describe: 'service id' }),
  replicas: opt.integer({
    min: 0,
    describe: "replicas while the override holds: in total (1 up to the scenario's maxReplicasPerService), or on --node (0 or more)",
  }),
  node: opt.integer({ min: 0, describe: 'hold the count on this edge node only' }),
  ttl: opt.number({
    min: 1,
    max: 2_592_000,
    describe: 'seconds until the override ends by itself, at least 1 (default: until --release)',
  }),
  release: opt.boolean({ default: false, describe: 'end the override: the service goes back to the policy' }),
  reason: opt.string({ demand: true, describe: 'why (recorded in the event)' }),
  // filled in at the call, as kais nodes does: $USER of the moment, and || since an empty $USER is no
  // name (it was sent, and refused as a --by the user never gave)
  by: opt.optString({ defaultText: '$USER, else admin', describe: 'who (recorded in the event)' }),
};
export const scaleCommand: CommandModule<object, object> = {
  command: 'scale',
  describe: "override a service's replica count (the placement policy keeps to it until it expires or is released)",
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example(
        `${ADMIN_TOKEN_ENV}=... $0 scale --orchestrator http://127.0.0.1:7001 --service 3 --replicas 6 --reason "launch"`,
        '6 replicas of service 3',
      ),
      SCALE_SPEC,
    ),
  handler: namingFlags(SCALE_SPEC, async (argv) => {
    const a = resolveOptions(SCALE_SPEC, argv);
    if (a.release && a.replicas !== undefined) throw new UsageError('--release: give --replicas or --release, not both');
    if (!a.release && a.replicas === undefined) throw new UsageError('--replicas: how many (or --release to end the override)');
    // a release ends the service's override, whatever it held: these would be dropped in silence
    if (a.release && a.node !== undefined) throw new UsageError('--node: only with --replicas (--release ends the whole override)');
    if (a.release && a.ttl !== undefined) throw new UsageError('--ttl: only with --replicas');
    const by = a.by ?? (process.env.USER || 'admin');
    const r = a.release
      ? await call(a, 'POST', '/v1/scale/release', { service: a.service, reason: a.reason, by }, { notFound: '--release' })
      : await call(a, 'POST', '/v1/scale', {
          service: a.service,
          replicas: a.replicas,
          node: a.node ?? null,
          ttlS: a.ttl ?? null,
          reason: a.reason,
          by,
        });
    if (typeof r.message !== 'string' || !Number.isInteger(r.placementVersion))
      throw new UsageError(`--orchestrator ${a.orchestrator}: answered JSON that is not a kais scale answer`);
    process.stdout.write(
      a.json ? `${JSON.stringify(r)}\n` : `${oneLine(r.message)} (placement v${String(r.placementVersion)}${refusedNote(r)})\n`,
    );
  }),
};

export const NODES_SPEC = {
  ...COMMON,
  hold: opt.integer({ min: 0, describe: 'hold this edge node out (its replicas leave, none comes)' }),
  readmit: opt.integer({ min: 0, describe: 'give a held node back to the policy' }),
  reason: opt.optString({ describe: 'why (needed with --hold and --readmit)' }),
  // no default in the spec: a --by given without a change is refused; $USER fills it in at the change
  by: opt.optString({ defaultText: '$USER, else admin', describe: 'who (recorded with --hold and --readmit)' }),
};
export const nodesCommand: CommandModule<object, object> = {
  command: 'nodes',
  describe: 'list edge nodes with their replicas and holds, or hold one out / re-admit it',
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example(`${ADMIN_TOKEN_ENV}=... $0 nodes --orchestrator http://127.0.0.1:7001 --hold 4 --reason "disk"`, 'hold node 4 out'),
      NODES_SPEC,
    ),
  handler: namingFlags(NODES_SPEC, async (argv) => {
    const a = resolveOptions(NODES_SPEC, argv);
    if (a.hold !== undefined && a.readmit !== undefined) throw new UsageError('--hold: give --hold or --readmit, not both');
    const change = a.hold !== undefined ? 'hold' : a.readmit !== undefined ? 'readmit' : null;
    if (change && !a.reason) throw new UsageError(`--reason: say why you ${change === 'hold' ? 'hold the node out' : 're-admit the node'}`);
    if (!change && a.reason) throw new UsageError('--reason: only with --hold or --readmit (listing the nodes records nothing)');
    if (!change && a.by !== undefined) throw new UsageError('--by: only with --hold or --readmit (listing the nodes records nothing)');
    const by = a.by ?? (process.env.USER || 'admin');
    const s = asStatus(
      a,
      change
        ? await call(
            a,
            'POST',
            `/v1/nodes/${change}`,
            { node: change === 'hold' ? a.hold : a.readmit, reason: a.reason, by },
            { flags: { node: `--${change}` }, notFound: `--${change}` },
          )
        : await call(a, 'GET', '/v1/status'),
    );
    if (a.json) return void process.stdout.write(`${JSON.stringify(s)}\n`);
    const placement = s.placement as number[][];
    const held = new Map((s.holds as { node: number; by: string; reason: string }[]).map((h) => [h.node, h]));
    const N = placement[0]?.length ?? 0;
    const rows: (string | number)[][] = [['node', 'replicas', 'held']];
    for (let n = 0; n < N; n++) {
      const h = held.get(n);
      rows.push([n, placement.reduce((x, row) => x + row[n], 0), h ? `by ${oneLine(String(h.by))}: ${oneLine(String(h.reason))}` : '']);
    }
    process.stdout.write(`${change ? `${oneLine(String(s.message))}${refusedNote(s, ' (', ')')}\n` : ''}${table(rows)}\n`);
  }),
};

export const WEIGHTS_SPEC = {
  ...COMMON,
  rollback: opt.boolean({
    default: false,
    describe:
      'every agent back to an earlier version (a running canary: its good one; else --to, default the newest stored version below the current one never rejected)',
  }),
  to: opt.integer({ min: 1, describe: 'with --rollback: the stored weight version to go back to' }),
  freeze: opt.boolean({
    default: false,
    describe: 'stop online learning: no update, no new version until --unfreeze (kept over a restart)',
  }),
  unfreeze: opt.boolean({ default: false, describe: 'online learning on again, from the current version' }),
  reason: opt.optString({ describe: 'why (needed with --rollback, --freeze and --unfreeze)' }),
  by: opt.optString({ defaultText: '$USER, else admin', describe: 'who (recorded in the event)' }),
};
export const weightsCommand: CommandModule<object, object> = {
  command: 'weights',
  describe: "show what the orchestrator's weights and safe learning do, or roll the agents' weights back, or freeze online learning",
  builder: (y: Argv<object>) =>
    yargsOptions(
      y
        .example(
          `${ADMIN_TOKEN_ENV}=... $0 weights --orchestrator http://127.0.0.1:7001 --rollback --reason "late rate up"`,
          'the previous good version',
        )
        .example(`${ADMIN_TOKEN_ENV}=... $0 weights --orchestrator http://127.0.0.1:7001 --freeze --reason "peak hours"`, 'no new version'),
      WEIGHTS_SPEC,
    ),
  handler: namingFlags(WEIGHTS_SPEC, async (argv) => {
    const a = resolveOptions(WEIGHTS_SPEC, argv);
    const changes = (['rollback', 'freeze', 'unfreeze'] as const).filter((k) => a[k]);
    if (changes.length > 1) throw new UsageError(`--${changes[1]}: give one of --rollback, --freeze and --unfreeze`);
    const change = changes[0] ?? null;
    if (a.to !== undefined && change !== 'rollback') throw new UsageError('--to: only with --rollback');
    if (change && !a.reason) throw new UsageError(`--reason: say why (recorded with the ${change})`);
    if (!change && a.reason) throw new UsageError('--reason: only with --rollback, --freeze or --unfreeze (showing records nothing)');
    if (!change && a.by !== undefined) throw new UsageError('--by: only with --rollback, --freeze or --unfreeze (showing records nothing)');
    const by = a.by ?? (process.env.USER || 'admin');
    const s = asStatus(
      a,
      change
        ? await call(a, 'POST', `/v1/weights/${change}`, {
            ...(change === 'rollback' && a.to !== undefined ? { to: a.to } : {}),
            reason: a.reason,
            by,
          })
        : await call(a, 'GET', '/v1/status'),
    );
    if (a.json) return void process.stdout.write(`${JSON.stringify(s)}\n`);
    // a change the store could not keep: call() said so on stderr (exit 1); the state as it stands follows
    const head = change && s.ok === true ? `${oneLine(String(s.message))}\n` : '';
    const lines = [`weights v${typeof s.weightVersion === 'number' ? s.weightVersion : '-'}`, ...safeLearningLines(s)];
    process.stdout.write(`${head}${lines.join('\n')}\n`);
  }),
};
