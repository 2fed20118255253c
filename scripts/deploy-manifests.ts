/**
 * The Kubernetes deployment of kais (issue 19 item 2; docs/kubernetes.md): generates the
 * Kustomize base in deploy/base/ from one description, and, with `--secrets <dir>`, an overlay
 * with fresh random tokens (the Secrets the base refers to; never committed).
 *
 *   node dist/scripts/deploy-manifests.js            # (re)writes deploy/base/
 *   node dist/scripts/deploy-manifests.js --check    # exit 1 when deploy/base/ is not what this makes
 *   node dist/scripts/deploy-manifests.js --secrets my-overlay [--scenario kais]
 *   kubectl kustomize my-overlay | kubectl apply -f -
 *
 * What the base holds: namespace `kais`; the orchestrator (Deployment of 1, Recreate: its SQLite
 * store is one writer on a ReadWriteOnce PVC; Service with the agents' WebSocket port 7000 and the
 * HTTP port 9090 of /metrics, /healthz, /readyz and the admin API); its ServiceAccount with the
 * RBAC the Kubernetes executor needs and nothing more (Deployments in its namespace: get, list,
 * watch, create, update; Nodes: get, list, watch); one agent DaemonSet per eAP on the nodes
 * labelled `kais.io/eap=<id>` (hostPort 8080: the devices of the eAP reach it on the node's
 * address); the agents' targets file (a ConfigMap to edit to your endpoints). Tokens live in
 * Secrets the overlay makes: `kais-orchestrator-config` (the orchestrator's config file: it holds
 * the tokens), `kais-agent-tokens` (one key per eAP), `kais-tls` (optional certificates). Every
 * container runs as user 10001, non-root, read-only root filesystem, no privilege escalation.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { loadScenario, topologyOf } from '../shared/scenario';

export const NAMESPACE = 'kais';
export const IMAGE = 'kais:0.1.0';
export const WS_PORT = 7000;
export const HTTP_PORT = 9090;
export const AGENT_PORT = 8080;
export const EAP_LABEL = 'kais.io/eap';
export const NODE_INDEX_LABEL = 'kais.io/node-index';
const USER = 10001;

type K8sObject = Record<string, unknown> & {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
};

const partOf = (component: string) => ({
  'app.kubernetes.io/name': 'kais',
  'app.kubernetes.io/component': component,
  'app.kubernetes.io/part-of': 'kais',
});

const securityContext = {
  runAsNonRoot: true,
  runAsUser: USER,
  runAsGroup: USER,
  allowPrivilegeEscalation: false,
  readOnlyRootFilesystem: true,
  capabilities: { drop: ['ALL'] },
};

/**
 * The orchestrator's config file as the deployment runs it (docs/kubernetes.md shows it; the
 * overlay adds the tokens): the Kubernetes executor in-cluster, the shipped model, online learning.
 */
export function orchestratorConfig(scenario = 'kais'): Record<string, unknown> {
  return {
    scenario,
    orchestration: 'static',
    executor: 'kubernetes',
    kubernetes: { kubeconfig: null, namespace: NAMESPACE, image: 'registry.example/kais-service:{service}', nodeLabel: NODE_INDEX_LABEL },
    checkpoint: '/app/models/kais-cmmac.bin',
    learner: 'cmmac',
    detector: 'vgru',
  };
}

/** The base's objects, by file name. */
export function baseObjects(scenarioName = 'kais'): Map<string, K8sObject[]> {
  const scenario = loadScenario(scenarioName);
  const { numEaps, numNodes } = topologyOf(scenario);
  const ns = { namespace: NAMESPACE };
  const files = new Map<string, K8sObject[]>();
  files.set('namespace.yaml', [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: NAMESPACE, labels: partOf('namespace') } }]);
  files.set('rbac.yaml', [
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'kais-orchestrator', ...ns, labels: partOf('orchestrator') } },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'kais-executor', ...ns, labels: partOf('orchestrator') },
      rules: [{ apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'list', 'watch', 'create', 'update'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: { name: 'kais-executor', ...ns, labels: partOf('orchestrator') },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'kais-executor' },
      subjects: [{ kind: 'ServiceAccount', name: 'kais-orchestrator', namespace: NAMESPACE }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'kais-executor-nodes', labels: partOf('orchestrator') },
      rules: [{ apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'kais-executor-nodes', labels: partOf('orchestrator') },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'kais-executor-nodes' },
      subjects: [{ kind: 'ServiceAccount', name: 'kais-orchestrator', namespace: NAMESPACE }],
    },
  ]);
  const orchLabels = partOf('orchestrator');
  files.set('orchestrator.yaml', [
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'kais-orchestrator-data', ...ns, labels: orchLabels },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '2Gi' } } },
    },
    {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'kais-orchestrator', ...ns, labels: orchLabels },
      spec: {
        replicas: 1,
        strategy: { type: 'Recreate' },
        selector: { matchLabels: orchLabels },
        template: {
          metadata: { labels: orchLabels },
          spec: {
            serviceAccountName: 'kais-orchestrator',
            securityContext: { fsGroup: USER, seccompProfile: { type: 'RuntimeDefault' } },
            containers: [
              {
                name: 'orchestrator',
                image: IMAGE,
                args: [
                  'orchestrator',
                  '--config',
                  '/etc/kais/config/orchestrator.json',
                  '--db',
                  '/var/lib/kais/orchestrator.db',
                  '--host',
                  '0.0.0.0',
                  '--port',
                  String(WS_PORT),
                  '--http-host',
                  '0.0.0.0',
                  '--http-port',
                  String(HTTP_PORT),
                ],
                ports: [
                  { name: 'ws', containerPort: WS_PORT },
                  { name: 'http', containerPort: HTTP_PORT },
                ],
                readinessProbe: { httpGet: { path: '/readyz', port: 'http' }, periodSeconds: 5 },
                livenessProbe: { httpGet: { path: '/healthz', port: 'http' }, periodSeconds: 10, failureThreshold: 6 },
                resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { memory: '2Gi' } },
                securityContext,
                volumeMounts: [
                  { name: 'config', mountPath: '/etc/kais/config', readOnly: true },
                  { name: 'data', mountPath: '/var/lib/kais' },
                  { name: 'tls', mountPath: '/etc/kais/tls', readOnly: true },
                  { name: 'tmp', mountPath: '/tmp' },
                ],
              },
            ],
            volumes: [
              { name: 'config', secret: { secretName: 'kais-orchestrator-config', defaultMode: 0o400 } },
              { name: 'data', persistentVolumeClaim: { claimName: 'kais-orchestrator-data' } },
              { name: 'tls', secret: { secretName: 'kais-tls', optional: true, defaultMode: 0o400 } },
              { name: 'tmp', emptyDir: {} },
            ],
          },
        },
      },
    },
    {
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: 'kais-orchestrator', ...ns, labels: orchLabels },
      spec: {
        selector: orchLabels,
        ports: [
          { name: 'ws', port: WS_PORT, targetPort: 'ws' },
          { name: 'http', port: HTTP_PORT, targetPort: 'http' },
        ],
      },
    },
  ]);
  const targets = {
    nodes: Array.from({ length: numNodes }, (_, n) => `http://kais-edge-${n}.${NAMESPACE}.svc.cluster.local:8080`),
    cloud: `http://kais-cloud.${NAMESPACE}.svc.cluster.local:8080`,
  };
  const agents: K8sObject[] = [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: 'kais-agent-targets', ...ns, labels: partOf('agent') },
      data: { 'targets.json': JSON.stringify(targets, null, 2) + '\n' },
    },
  ];
  for (let e = 0; e < numEaps; e++) {
    const labels = { ...partOf('agent'), [EAP_LABEL]: String(e) };
    agents.push({
      apiVersion: 'apps/v1',
      kind: 'DaemonSet',
      metadata: { name: `kais-agent-eap-${e}`, ...ns, labels },
      spec: {
        selector: { matchLabels: labels },
        updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
        template: {
          metadata: { labels },
          spec: {
            nodeSelector: { [EAP_LABEL]: String(e) },
            automountServiceAccountToken: false,
            securityContext: { fsGroup: USER, seccompProfile: { type: 'RuntimeDefault' } },
            // the agent's drain: at most 30 s for open requests, then at most 5 s for the last records (agent/main.ts)
            terminationGracePeriodSeconds: 40,
            containers: [
              {
                name: 'agent',
                image: IMAGE,
                args: [
                  'agent',
                  '--orchestrator',
                  `ws://kais-orchestrator.${NAMESPACE}.svc.cluster.local:${WS_PORT}`,
                  '--eap',
                  String(e),
                  '--scenario',
                  scenarioName,
                  '--targets',
                  '/etc/kais/targets/targets.json',
                  '--token-file',
                  `/etc/kais/token/eap-${e}`,
                  '--host',
                  '0.0.0.0',
                  '--port',
                  String(AGENT_PORT),
                  '--cache',
                  '/var/cache/kais/agent',
                ],
                ports: [{ name: 'ingress', containerPort: AGENT_PORT, hostPort: AGENT_PORT }],
                readinessProbe: { httpGet: { path: '/readyz', port: 'ingress' }, periodSeconds: 5 },
                livenessProbe: { httpGet: { path: '/healthz', port: 'ingress' }, periodSeconds: 10, failureThreshold: 6 },
                resources: { requests: { cpu: '250m', memory: '256Mi' }, limits: { memory: '1Gi' } },
                securityContext,
                volumeMounts: [
                  { name: 'targets', mountPath: '/etc/kais/targets', readOnly: true },
                  { name: 'token', mountPath: '/etc/kais/token', readOnly: true },
                  { name: 'cache', mountPath: '/var/cache/kais' },
                  { name: 'tmp', mountPath: '/tmp' },
                ],
              },
            ],
            volumes: [
              { name: 'targets', configMap: { name: 'kais-agent-targets' } },
              {
                name: 'token',
                secret: { secretName: 'kais-agent-tokens', items: [{ key: `eap-${e}`, path: `eap-${e}` }], defaultMode: 0o400 },
              },
              // the weights/placement cache survives container restarts (an agent that restarts while
              // its link is down dispatches with what it last held)
              { name: 'cache', emptyDir: {} },
              { name: 'tmp', emptyDir: {} },
            ],
          },
        },
      },
    });
  }
  files.set('agents.yaml', agents);
  return files;
}

/** The Secrets the base refers to, by name (and the keys each must hold). */
export function secretsNeeded(scenarioName = 'kais'): Record<string, string[]> {
  const { numEaps } = topologyOf(loadScenario(scenarioName));
  return {
    'kais-orchestrator-config': ['orchestrator.json'],
    'kais-agent-tokens': Array.from({ length: numEaps }, (_, e) => `eap-${e}`),
  };
}

const HEADER = '# Generated by scripts/deploy-manifests.ts (docs/kubernetes.md): edit that script, not this file.\n';

export function renderBase(scenarioName = 'kais'): Map<string, string> {
  const out = new Map<string, string>();
  const files = baseObjects(scenarioName);
  for (const [file, objs] of files)
    out.set(file, HEADER + objs.map((o) => yaml.dump(o, { lineWidth: 140, noRefs: true, sortKeys: false })).join('---\n'));
  out.set(
    'kustomization.yaml',
    HEADER +
      yaml.dump({
        apiVersion: 'kustomize.config.k8s.io/v1beta1',
        kind: 'Kustomization',
        resources: [...files.keys()],
      }),
  );
  return out;
}

/** An overlay with random tokens: the Secrets of the base, and the tokens each side needs. */
export function renderOverlay(
  base: string,
  scenarioName = 'kais',
  random = (n: number) => randomBytes(n).toString('hex'),
): Map<string, string> {
  const { numEaps } = topologyOf(loadScenario(scenarioName));
  const agentTokens: Record<string, string> = {};
  for (let e = 0; e < numEaps; e++) agentTokens[String(e)] = random(24);
  const config = { ...orchestratorConfig(scenarioName), adminToken: random(24), agentTokens };
  const out = new Map<string, string>();
  out.set('orchestrator.json', JSON.stringify(config, null, 2) + '\n');
  for (let e = 0; e < numEaps; e++) out.set(`eap-${e}`, agentTokens[String(e)] + '\n');
  out.set(
    'kustomization.yaml',
    yaml.dump({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources: [base],
      generatorOptions: { disableNameSuffixHash: true },
      secretGenerator: [
        { name: 'kais-orchestrator-config', namespace: NAMESPACE, files: ['orchestrator.json'] },
        { name: 'kais-agent-tokens', namespace: NAMESPACE, files: Array.from({ length: numEaps }, (_, e) => `eap-${e}`) },
      ],
    }),
  );
  return out;
}

function main(argv: string[]): number {
  const root = path.resolve(__dirname, '..', '..');
  const baseDir = path.join(root, 'deploy', 'base');
  const scenario = argv.includes('--scenario') ? argv[argv.indexOf('--scenario') + 1] : 'kais';
  if (argv.includes('--secrets')) {
    const dir = argv[argv.indexOf('--secrets') + 1];
    if (!dir) {
      process.stderr.write('--secrets: needs a directory\n');
      return 2;
    }
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    for (const [f, text] of renderOverlay(path.relative(path.resolve(dir), baseDir), scenario))
      fs.writeFileSync(path.join(dir, f), text, { mode: 0o600 });
    process.stdout.write(`wrote ${dir} (keep it out of version control): kubectl kustomize ${dir} | kubectl apply -f -\n`);
    return 0;
  }
  const want = renderBase(scenario);
  if (argv.includes('--check')) {
    const stale = [...want].filter(
      ([f, t]) => !fs.existsSync(path.join(baseDir, f)) || fs.readFileSync(path.join(baseDir, f), 'utf8') !== t,
    );
    for (const [f] of stale) process.stderr.write(`deploy/base/${f} is not what scripts/deploy-manifests.ts makes\n`);
    return stale.length ? 1 : 0;
  }
  fs.mkdirSync(baseDir, { recursive: true });
  for (const [f, text] of want) fs.writeFileSync(path.join(baseDir, f), text);
  process.stdout.write(`wrote deploy/base (${want.size} files)\n`);
  return 0;
}

if (require.main === module) process.exit(main(process.argv.slice(2)));
