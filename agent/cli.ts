/**
 * `kais agent --orchestrator <ws-url> --eap <id> --targets <file> [--token-file F | --token T] [--port N]
 * [--scenario kais] [--cache <dir>] [--speed x] [--policy cmmac|lec|jsq|...] [--seed S] [--explore s]
 * [--experience explored|all|none] [--no-device-filters] [--offline-buffer N] [--offline-buffer-mib M]
 * [--guard [--guard-fallback F] [--guard-enter x] [--guard-exit y] [--guard-mid F|none] [--guard-mid-enter x]
 * [--guard-mid-exit y]] [--tls-cert F --tls-key F] [--tls-ca F]`:
 * one eAP's dispatcher as a process (https ingress with a certificate; --tls-ca: the CA a wss:// orchestrator is checked against).
 *
 * Prints one JSON line on stdout once listening (`{"ready":true,"eap":..,"port":..}`), logs to
 * stderr, and on SIGTERM/SIGINT drains (answers every request it holds) and exits 0.
 * `--targets` is a JSON file `{"nodes": ["http://..", ...], "cloud": "http://.."}` (node id =
 * index), as `kais node` prints it. The hello token comes from --token-file, else --token (shown in
 * `ps`: kept for scripts), else $KAIS_AGENT_TOKEN. The options: AGENT_SPEC (docs/cli.md).
 */
import type { Argv, CommandModule } from 'yargs';
import { namingFlags, opt, readInputFile, resolveOptions, yargsOptions } from '../shared/config';
import { checkHost, checkPortFree, listenProblem, resolveSecret, untilStopSignal } from '../shared/lifecycle';
import { SPEED_RANGE } from '../shared/domain';
import { UsageError } from '../shared/errors';
import { loadScenario } from '../shared/scenario';
import { topologyOf } from '../shared/scenario';
import { checkLivePolicy, LIVE_POLICIES } from '../shared/dispatch';
import type { RegimeGuardOptions } from '../shared/dispatch/guard';
import { GUARD_SPEC, guardFromFlags } from '../shared/dispatch/guard-options';
import { EXPERIENCE_MODES, type Targets } from './dispatcher';
import { startAgent } from './main';
import { lineLogger, processLogger } from '../shared/log';
import { defaultCacheDir } from './weights-cache';
import { DEFAULT_OFFLINE_BUFFER, DEFAULT_OFFLINE_BUFFER_MIB } from './outbox';
import { loadCa, loadTlsPair } from '../shared/tls';

/** Environment variable holding the hello token when neither --token-file nor --token is given. */
export const AGENT_TOKEN_ENV = 'KAIS_AGENT_TOKEN';

/** The options of `kais agent`, declared once (shared/config.ts makes the flags, checks and docs). */
export const AGENT_SPEC = {
  orchestrator: opt.url(['ws:', 'wss:'], { demand: true, describe: 'orchestrator URL, ws://host:port (wss:// when it has a certificate)' }),
  tlsCa: opt.file({
    describe:
      "CA certificate (PEM) the wss:// orchestrator's certificate must chain to (its own certificate when self-signed; default: Node's CA store)",
  }),
  tlsCert: opt.file({ describe: 'certificate (PEM) of the ingress: https instead of http (with --tls-key)' }),
  tlsKey: opt.file({ describe: "private key (PEM) of --tls-cert's certificate" }),
  eap: opt.integer({ demand: true, min: 0, describe: 'eAP id of this agent (0 .. eAPs of the scenario - 1)' }),
  targets: opt.file<string>({ demand: true, describe: 'JSON file {nodes: [url], cloud: url} (kais node prints it)' }),
  tokenFile: opt.secretFile({ describe: `file whose first line is the token for the orchestrator hello (default: $${AGENT_TOKEN_ENV})` }),
  token: opt.optString({
    empty: true,
    describe: `token for the orchestrator hello, visible in ps: prefer --token-file or $${AGENT_TOKEN_ENV}`,
  }),
  port: opt.port({ default: 0, describe: 'HTTP port (0: a free one)' }),
  host: opt.string({ default: '127.0.0.1', describe: 'address the HTTP port listens on (0.0.0.0: every interface, as in a pod)' }),
  scenario: opt.string({ default: 'kais', describe: 'built-in scenario or a .json file' }),
  cache: opt.outDir({
    defaultText: '$XDG_CACHE_HOME/kais/agent-<eap> (else ~/.cache/kais/agent-<eap>)',
    describe:
      'private directory of the weights/placement cache (created 0700; refused if another user owns it or others can write it; an existing one others can read is made 0700: give a folder of its own, not your home)',
  }),
  speed: opt.number({ default: 1, min: SPEED_RANGE.min, max: SPEED_RANGE.max, describe: 'time scale of the replayed workload' }),
  actorHead: opt.choice(['softplus1', 'relu1'] as const, {
    default: 'softplus1',
    describe: 'actor head for weights frames that do not name one (older orchestrators): softplus1 (kais train default) or relu1',
  }),
  policy: opt.string({
    default: 'cmmac',
    describe: `dispatch policy: cmmac (the actor once weights arrive, lec before) or a heuristic of the simulator, which then decides everything and ignores weights (${LIVE_POLICIES.join(', ')})`,
  }),
  seed: opt.integer({
    default: 1,
    describe: "run seed: a heuristic's reset seed is derived from it and --eap (random, p2c, prob draw from it)",
  }),
  explore: opt.number({
    defaultText: "0, or 1 while the orchestrator's model acts by sampling (its welcome says act: sample)",
    min: 0,
    max: 1,
    describe: 'share of decisions drawn from the policy instead of its most likely target; the online learner learns from those',
  }),
  deviceFilters: opt.boolean({
    default: true,
    describe:
      "device filters on every node's GET /telemetry and QoS isolation on this agent's outcomes; excluded nodes leave the mask (--no-device-filters: off)",
  }),
  telemetryStalePolls: opt.integer({
    default: 36,
    min: 1,
    max: 1_000_000,
    describe:
      "with the device filters: polls of a node's /telemetry in a row without a new seq after which the node is excluded (rule device:stale; back after healthy windows). Keep it above the exporter's refresh period in polls (one poll a second)",
  }),
  secondStage: opt.choice(['none', 'l2'] as const, {
    default: 'none',
    describe:
      "with the device filters: 'l2' adds the L2 second stage on every window (excludes a node after 5 anomalous windows in a row, rule device:l2; off by default: docs/detect.md)",
  }),
  guard: opt.boolean({
    default: false,
    describe:
      "regime guard over cmmac: while this eAP's share of requests no target can serve in time (lec's estimate) says overload, --guard-fallback decides instead (docs/safe-learning.md)",
  }),
  ...GUARD_SPEC,
  offlineBuffer: opt.integer({
    default: DEFAULT_OFFLINE_BUFFER,
    min: 0,
    max: 1_000_000,
    describe:
      'records (telemetry intervals, experience frames of up to 64 transitions) kept while the orchestrator link is down, sent in order when it is back; beyond, the oldest are dropped and counted (kais_agent_offline_dropped_total); 0: keep none',
  }),
  offlineBufferMib: opt.integer({
    default: DEFAULT_OFFLINE_BUFFER_MIB,
    min: 1,
    max: 4096,
    describe:
      "the same buffer bounded in MiB (the records' estimated encoded size; an experience frame of 64 transitions is ~170 KB on kais, ~390 KB on large): beyond, the oldest are dropped and counted as above",
  }),
  experience: opt.choice(EXPERIENCE_MODES, {
    default: 'explored',
    describe: 'decisions sent to the orchestrator as experience: explored (the drawn ones, what the online learner uses), all, or none',
  }),
};

export function readTargets(file: string, numNodes: number): Targets {
  const text = readInputFile(file, '--targets');
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new UsageError(`--targets: cannot read ${file} as JSON (${(e as Error).message})`);
  }
  const o = raw as { nodes?: unknown; cloud?: unknown };
  if (!o || !Array.isArray(o.nodes) || !o.nodes.every((u) => typeof u === 'string') || typeof o.cloud !== 'string') {
    throw new UsageError(`--targets: ${file} must hold {"nodes": [http URLs], "cloud": http URL}`);
  }
  if (o.nodes.length !== numNodes) throw new UsageError(`--targets: ${file} lists ${o.nodes.length} nodes, the scenario has ${numNodes}`);
  const nodes = (o.nodes as string[]).map((u, i) => targetUrl(file, `nodes[${i}]`, u));
  const cloud = targetUrl(file, 'cloud', o.cloud);
  // one server listed twice would be judged (filters, isolation) and loaded as two
  const seen = new Map<string, string>();
  for (const [field, u] of [...nodes.map((u, i) => [`nodes[${i}]`, u]), ['cloud', cloud]]) {
    const first = seen.get(u);
    if (first !== undefined) throw new UsageError(`--targets: ${file}: ${field} ${JSON.stringify(u)} is ${first}'s URL too`);
    seen.set(u, field);
  }
  return { nodes, cloud };
}

/**
 * A target's base URL as the proxy and the telemetry poller use it: http:// (they speak plain HTTP,
 * the cluster's own network: an https:// cloud was spoken to in plain text, an https:// node crashed
 * the poller), a host and a valid port, no path but `/`, no query or fragment; a trailing `/` is
 * dropped (it made every request `//serve`, answered 404). A URL that passed the old prefix check
 * and failed later (`http://127.0.0.1:99999`) crashed the agent at its first request.
 */
function targetUrl(file: string, field: string, raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--targets: ${file}: ${field} ${JSON.stringify(raw)} is not a URL`);
  }
  if (url.protocol !== 'http:')
    throw new UsageError(`--targets: ${file}: ${field} ${JSON.stringify(raw)}: targets speak plain HTTP (http://host:port)`);
  if (url.username || url.password || url.search || url.hash || url.pathname !== '/')
    throw new UsageError(`--targets: ${file}: ${field} ${JSON.stringify(raw)}: only http://host:port (no path, query or user)`);
  // port 0 is no server's: every request to it failed and went to the cloud, unsaid
  if (url.port === '0') throw new UsageError(`--targets: ${file}: ${field} ${JSON.stringify(raw)}: port 0 is not a server's port`);
  return `${url.protocol}//${url.host}`;
}

export const agentCommand: CommandModule<object, object> = {
  command: 'agent',
  describe: 'run the dispatcher of one eAP (HTTP ingress, policy, proxy, orchestrator link)',
  builder: (y: Argv<object>) =>
    yargsOptions(
      y.example(
        `${AGENT_TOKEN_ENV}=secret $0 agent --orchestrator ws://127.0.0.1:7000 --eap 0 --targets targets.json`,
        'eAP 0 of the kais scenario',
      ),
      AGENT_SPEC,
    ),
  handler: namingFlags(AGENT_SPEC, async (argv) => {
    const a = resolveOptions(AGENT_SPEC, argv);
    const token = resolveSecret({
      inline: a.token,
      inlineFlag: 'token',
      fromFile: a.tokenFile,
      fileFlag: 'token-file',
      env: AGENT_TOKEN_ENV,
    });
    const scenario = loadScenario(a.scenario);
    const topo = topologyOf(scenario);
    if (a.eap >= topo.numEaps)
      throw new UsageError(`--eap: expected an integer in 0..${topo.numEaps - 1} (scenario ${scenario.name}), got ${a.eap}`);
    const policy = checkLivePolicy(a.policy);
    const flagged = guardFromFlags(a); // checked with or without --guard: a wrong flag is named either way
    const guard: RegimeGuardOptions | null = a.guard ? flagged : null;
    const targets = readTargets(a.targets, topo.numNodes);
    if (a.secondStage === 'l2' && !a.deviceFilters)
      throw new UsageError('--second-stage l2: needs the device filters (drop --no-device-filters)');
    if ((a.tlsCert === undefined) !== (a.tlsKey === undefined))
      throw new UsageError(
        `--${a.tlsCert === undefined ? 'tls-cert' : 'tls-key'}: needed with --${a.tlsCert === undefined ? 'tls-key' : 'tls-cert'}`,
      );
    const tls = a.tlsCert !== undefined ? loadTlsPair({ cert: a.tlsCert, key: a.tlsKey! }, '--tls-cert/--tls-key') : null;
    const orchestratorCa = a.tlsCa !== undefined ? loadCa(a.tlsCa, '--tls-ca') : undefined;
    if (orchestratorCa !== undefined && !a.orchestrator.startsWith('wss:'))
      throw new UsageError(`--tls-ca: the orchestrator URL ${a.orchestrator} is not wss://`);
    await checkHost('host', a.host);
    await checkPortFree('port', a.port);
    const log = lineLogger(processLogger('agent', { eap: a.eap })); // JSON lines on stderr (shared/log.ts)
    const agent = await startAgent({
      scenario,
      eap: a.eap,
      orchestratorUrl: a.orchestrator,
      targets,
      token,
      port: a.port,
      host: a.host,
      cacheDir: a.cache ?? defaultCacheDir(a.eap),
      speed: a.speed,
      actorHead: a.actorHead,
      policy,
      policySeed: a.seed,
      explore: a.explore,
      experience: a.experience,
      guard,
      deviceFilters: a.deviceFilters,
      secondStage: a.secondStage === 'l2',
      telemetryStalePolls: a.telemetryStalePolls,
      offlineBuffer: a.offlineBuffer,
      offlineBufferMib: a.offlineBufferMib,
      tls,
      ...(orchestratorCa !== undefined ? { orchestratorCa } : {}),
      log,
    }).catch((e: NodeJS.ErrnoException) => {
      throw listenProblem(e, 'port', a.port) ?? e;
    });
    process.stdout.write(`${JSON.stringify({ ready: true, eap: a.eap, port: agent.port, ...(tls ? { tls: true } : {}) })}\n`);
    await untilStopSignal((signal) => log(`${signal} again: already draining, the requests held are answered first`));
    log('draining');
    await agent.drain();
    log('drained, exiting');
    process.exit(0);
  }),
};
