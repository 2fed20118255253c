/**
 * TLS and tokens between agents and the orchestrator (issue 18 item 5), on loopback with a
 * self-signed pair made at run time (shared/tls.ts): a real hub on wss://, a real emulated cluster,
 * real agents (startAgent) with an https ingress.
 *
 * - end to end over wss:// and https://: the agent connects with the orchestrator's certificate as
 *   its CA, gets the placement, and serves a request posted to its https ingress;
 * - a wrong certificate (the agent trusts another CA): refused on both sides, with the agent's log
 *   line and its kais_agent_orchestrator_tls_failures_total, and the hub's tlsFailures / tlsError;
 * - a missing token and another eAP's token: the hello is refused (KAIS_ERR_AUTH), the agent logs
 *   it, the hub counts it and says why (denied);
 * - bad files: a key that is not the certificate's, a file that is not PEM: one line naming it.
 *
 * Waits are on conditions polled against a deadline, never on fixed sleeps.
 */
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as os from 'node:os';
import * as path from 'node:path';
import { startAgent, type RunningAgent } from '../../agent/main';
import { EmulatedCluster, initialPlacement } from '../../orchestrator/emulated-cluster';
import type { DenialInfo, Hub } from '../../orchestrator/hub';
import { ModelRegistry, startHub } from '../../orchestrator/registry';
import { Store } from '../../orchestrator/store';
import { loadScenario } from '../../shared/scenario';
import { loadCa, loadTlsPair, writeSelfSignedPair, type TlsFiles, type TlsPair } from '../../shared/tls';
import { parseMetrics, sample } from '../support/prometheus';
import { until as waitUntil } from '../support/wait';

const scenario = loadScenario('small');

const until = (cond: () => boolean, what: string, ms = 15_000): Promise<void> => waitUntil(cond, what, ms);

function httpsRequest(port: number, method: string, url: string, ca: string, body?: unknown): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    const req = https.request(
      { host: '127.0.0.1', port, method, path: url, ca, headers: data ? { 'content-type': 'application/json' } : {} },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

describe('TLS and tokens between agents and orchestrator', () => {
  let dir: string;
  let files: TlsFiles;
  let pair: TlsPair;
  let other: TlsPair;
  let cluster: EmulatedCluster;
  let store: Store;
  let hub: Hub;
  let registry: ModelRegistry;
  const agents: RunningAgent[] = [];
  const denials: DenialInfo[] = [];
  const tlsErrors: string[] = [];

  beforeAll(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-tls-'));
    ({ files, pair } = await writeSelfSignedPair(path.join(dir, 'orchestrator')));
    ({ pair: other } = await writeSelfSignedPair(path.join(dir, 'other')));
    cluster = new EmulatedCluster({ scenario });
    await cluster.listen();
    store = Store.open(path.join(dir, 'o.db'));
    hub = await startHub(store, {
      heartbeatMs: 1000,
      tls: loadTlsPair(files, 'test'),
      agentTokens: { 0: 'token-of-eap-0', 1: 'token-of-eap-1' },
    });
    hub.on('denied', (d) => denials.push(d));
    hub.on('tlsError', (f) => tlsErrors.push(f.reason));
    registry = new ModelRegistry(store, hub);
    registry.publishPlacement(0, initialPlacement(scenario));
  });

  afterAll(async () => {
    for (const a of agents.splice(0)) await a.drain();
    registry.dispose();
    await hub.close();
    store.close();
    await cluster.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const start = async (eap: number, token: string | undefined, ca: string, lines: string[]) => {
    const a = await startAgent({
      scenario,
      eap,
      orchestratorUrl: hub.url,
      targets: { nodes: cluster.nodeUrls, cloud: cluster.cloudUrl },
      cacheDir: null,
      batchMs: 100,
      ...(token !== undefined ? { token } : {}),
      orchestratorCa: ca,
      tls: pair,
      log: (l: string) => lines.push(l),
    });
    agents.push(a);
    return a;
  };

  it('runs end to end over wss:// and https://', async () => {
    expect(hub.url).toMatch(/^wss:\/\/127\.0\.0\.1:\d+$/);
    const lines: string[] = [];
    const a = await start(0, 'token-of-eap-0', pair.cert, lines);
    await until(() => a.runtime.placementVersion === 1, 'the placement over wss://');
    const r = await httpsRequest(a.port, 'POST', '/request', pair.cert, {
      service: 0,
      deadlineMs: 2000,
      payloadBytes: 1000,
      workCoreS: 0.01,
    });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text)).toHaveProperty('target');
    const health = JSON.parse((await httpsRequest(a.port, 'GET', '/healthz', pair.cert)).text) as Record<string, unknown>;
    expect(health).toMatchObject({ connected: true, tls: true, tlsFailures: 0 });
    // a client without the run's CA refuses the ingress's self-signed certificate
    await expect(
      new Promise((resolve, reject) => {
        const req = https.request({ host: '127.0.0.1', port: a.port, path: '/healthz' }, resolve);
        req.on('error', reject);
        req.end();
      }),
    ).rejects.toThrow(/self-signed|SELF_SIGNED/i);
  });

  it('refuses a wrong certificate on both sides, with a log line and a metric', async () => {
    const before = hub.stats.tlsFailures;
    const lines: string[] = [];
    const a = await start(1, 'token-of-eap-1', other.cert, lines);
    await until(() => (a.health().tlsFailures as number) >= 2, 'two refused handshakes');
    expect(a.health().connected).toBe(false);
    expect(lines.some((l) => /orchestrator certificate refused .*SELF_SIGNED/.test(l))).toBe(true);
    const m = parseMetrics((await httpsRequest(a.port, 'GET', '/metrics', pair.cert)).text);
    expect(sample(m, 'kais_agent_orchestrator_tls_failures_total')).toBeGreaterThanOrEqual(2);
    await until(() => hub.stats.tlsFailures > before, "the hub's count");
    expect(tlsErrors.length).toBeGreaterThan(0);
    await agents.pop()!.drain();
  });

  it("refuses a missing token and another eAP's token at hello", async () => {
    const authBefore = hub.stats.authFailures;
    const none: string[] = [];
    const wrong: string[] = [];
    await start(1, undefined, pair.cert, none);
    await start(1, 'token-of-eap-0', pair.cert, wrong);
    await until(() => hub.stats.authFailures >= authBefore + 2, 'two refused hellos');
    await until(() => none.some((l) => /refused hello/.test(l)) && wrong.some((l) => /refused hello/.test(l)), 'the agents to say so');
    expect(denials.filter((d) => d.kind === 'auth' && d.eapId === 1).length).toBeGreaterThanOrEqual(2);
    expect(agents.slice(-2).every((a) => a.health().connected === false)).toBe(true);
    // the link has stopped for good: /healthz says so (it said ok) and a gauge shows it
    const refused = agents[agents.length - 1];
    expect(refused.health()).toMatchObject({ ok: false, linkRefused: expect.stringMatching(/./) });
    const m = parseMetrics((await httpsRequest(refused.port, 'GET', '/metrics', pair.cert)).text);
    expect(sample(m, 'kais_agent_link_refused')).toBe(1);
    for (const a of agents.splice(-2)) await a.drain();
  });

  it('says which file is wrong, in one line', () => {
    expect(() => loadTlsPair({ cert: files.cert, key: path.join(dir, 'other', 'key.pem') }, '--tls-cert/--tls-key')).toThrow(
      /^--tls-cert\/--tls-key: the key .*other\/key\.pem is not the key of the certificate .*cert\.pem$/,
    );
    const notPem = path.join(dir, 'not.pem');
    fs.writeFileSync(notPem, 'hello');
    expect(() => loadCa(notPem, '--tls-ca')).toThrow(/^--tls-ca: the CA certificate .*not\.pem is not a PEM certificate$/);
    expect(() => loadTlsPair({ cert: path.join(dir, 'missing.pem'), key: files.key }, 'tls.cert')).toThrow(
      /^tls\.cert: cannot read the certificate .*missing\.pem: ENOENT$/,
    );
  });
});
