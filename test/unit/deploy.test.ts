/**
 * The Kubernetes deployment (deploy/, scripts/deploy-manifests.ts, docs/kubernetes.md; issue 19
 * item 2): deploy/base is what the script generates; every object of the base, and of an overlay
 * rendered by `kubectl kustomize` (when kubectl is on PATH), is valid against the Kubernetes
 * schemas (kubernetes-models); the containers' flags are options of the commands they run; the
 * RBAC grants what the executor uses and nothing else; the documented settings are the
 * manifests'; the Dockerfile is multi-stage, non-root, `npm ci --omit=dev`, models inside.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as yaml from 'js-yaml';
import { Deployment, DaemonSet } from 'kubernetes-models/apps/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Namespace, PersistentVolumeClaim, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import { AGENT_SPEC } from '../../agent/cli';
import { ORCHESTRATOR_SPEC } from '../../orchestrator/cli';
import { readConfig } from '../../orchestrator/main';
import {
  AGENT_PORT,
  EAP_LABEL,
  HTTP_PORT,
  IMAGE,
  NAMESPACE,
  NODE_INDEX_LABEL,
  WS_PORT,
  orchestratorConfig,
  renderBase,
  renderOverlay,
  secretsNeeded,
} from '../../scripts/deploy-manifests';
import { topologyOf, loadScenario } from '../../shared/scenario';

const root = path.join(__dirname, '..', '..');
const baseDir = path.join(root, 'deploy', 'base');
type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: any;
};

const MODELS: Record<string, new (o: any) => { validate(): void }> = {
  'v1/Namespace': Namespace,
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'v1/PersistentVolumeClaim': PersistentVolumeClaim,
  'v1/Secret': Secret,
  'apps/v1/Deployment': Deployment,
  'apps/v1/DaemonSet': DaemonSet,
  'rbac.authorization.k8s.io/v1/Role': Role,
  'rbac.authorization.k8s.io/v1/RoleBinding': RoleBinding,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
};

/** Throws when o is not schema-valid (or of a kind this test does not know). */
function validate(o: Obj): void {
  const M = MODELS[`${o.apiVersion}/${o.kind}`];
  if (!M) throw new Error(`no schema for ${o.apiVersion}/${o.kind}`);
  new M(o).validate();
}

function readBase(): Obj[] {
  const k = yaml.load(fs.readFileSync(path.join(baseDir, 'kustomization.yaml'), 'utf8')) as { resources: string[] };
  return k.resources.flatMap((f) => yaml.loadAll(fs.readFileSync(path.join(baseDir, f), 'utf8')) as Obj[]);
}

const kebab = (flag: string) => flag.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

describe('deploy/base', () => {
  test('is what scripts/deploy-manifests.ts generates (node dist/scripts/deploy-manifests.js rewrites it)', () => {
    const want = renderBase();
    const have = fs.readdirSync(baseDir).sort();
    expect(have).toEqual([...want.keys()].sort());
    for (const [f, text] of want) expect(`${f}:\n${fs.readFileSync(path.join(baseDir, f), 'utf8')}`).toBe(`${f}:\n${text}`);
  });

  test('every object is valid against the Kubernetes schemas, and the check catches an invalid one', () => {
    const objs = readBase();
    const kinds = objs.map((o) => o.kind);
    const { numEaps } = topologyOf(loadScenario('kais'));
    expect(kinds.filter((k) => k === 'DaemonSet')).toHaveLength(numEaps);
    for (const k of [
      'Namespace',
      'ServiceAccount',
      'Role',
      'RoleBinding',
      'ClusterRole',
      'ClusterRoleBinding',
      'PersistentVolumeClaim',
      'Deployment',
      'Service',
      'ConfigMap',
    ])
      expect(kinds).toContain(k);
    for (const o of objs) expect(() => validate(o)).not.toThrow();
    // the validator is not a rubber stamp
    const dep = structuredClone(objs.find((o) => o.kind === 'Deployment')!);
    dep.spec.replicas = 'one';
    expect(() => validate(dep)).toThrow();
    const ds = structuredClone(objs.find((o) => o.kind === 'DaemonSet')!);
    delete ds.spec.selector;
    expect(() => validate(ds)).toThrow();
  });

  test("every container's flags are options of the kais command it runs, and it runs as non-root", () => {
    const specs: Record<string, Record<string, unknown>> = { orchestrator: ORCHESTRATOR_SPEC, agent: AGENT_SPEC };
    for (const o of readBase().filter((x) => x.kind === 'Deployment' || x.kind === 'DaemonSet')) {
      const pod = o.spec.template.spec;
      for (const c of pod.containers) {
        const [command, ...args] = c.args as string[];
        expect(Object.keys(specs)).toContain(command);
        const flags = args.filter((a) => a.startsWith('--')).map((a) => kebab(a.slice(2)));
        expect(flags.filter((f) => !(f in specs[command]))).toEqual([]);
        expect(c.securityContext).toMatchObject({ runAsNonRoot: true, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true });
        expect(c.securityContext.runAsUser).toBeGreaterThan(0);
        expect(c.image).toBe(IMAGE);
      }
    }
  });

  test('the RBAC grants the executor what it calls and nothing more: no delete, no patch, no wildcard', () => {
    const roles = readBase().filter((o) => o.kind === 'Role' || o.kind === 'ClusterRole');
    const grants = roles.flatMap((r) =>
      (r.rules as { apiGroups: string[]; resources: string[]; verbs: string[] }[]).flatMap((rule) =>
        rule.resources.flatMap((res) => rule.verbs.map((v) => `${r.kind}:${rule.apiGroups.join()}/${res}:${v}`)),
      ),
    );
    expect(grants.sort()).toEqual(
      [
        'ClusterRole:/nodes:get',
        'ClusterRole:/nodes:list',
        'ClusterRole:/nodes:watch',
        'Role:apps/deployments:create',
        'Role:apps/deployments:get',
        'Role:apps/deployments:list',
        'Role:apps/deployments:update',
        'Role:apps/deployments:watch',
      ].sort(),
    );
    // the Role is namespaced where the executor writes
    expect(roles.find((r) => r.kind === 'Role')!.metadata.namespace).toBe(
      (orchestratorConfig().kubernetes as { namespace: string }).namespace,
    );
  });

  test('the documented settings are the manifests', () => {
    const doc = fs.readFileSync(path.join(root, 'docs', 'kubernetes.md'), 'utf8');
    // the orchestrator config block of the docs is the one the overlay puts in its Secret
    const block = /<!-- orchestrator-config -->\s*```json\n([\s\S]*?)```/.exec(doc);
    expect(block).not.toBeNull();
    expect(JSON.parse(block![1])).toEqual(orchestratorConfig());
    // the settings table
    const rows = Object.fromEntries([...doc.matchAll(/^\| ([a-z][a-z -]+) \| `([^`]+)` \|/gm)].map((m) => [m[1].trim(), m[2]]));
    const objs = readBase();
    const svc = objs.find((o) => o.kind === 'Service')!;
    const ds = objs.find((o) => o.kind === 'DaemonSet')!;
    const pvc = objs.find((o) => o.kind === 'PersistentVolumeClaim')!;
    expect(rows).toMatchObject({
      namespace: NAMESPACE,
      image: IMAGE,
      'orchestrator websocket port': String(svc.spec.ports.find((p: any) => p.name === 'ws').port),
      'orchestrator http port': String(svc.spec.ports.find((p: any) => p.name === 'http').port),
      'agent port': String(ds.spec.template.spec.containers[0].ports[0].hostPort),
      'eap node label': `${Object.keys(ds.spec.template.spec.nodeSelector)[0]}=<eAP id>`,
      'edge node label': `${NODE_INDEX_LABEL}=<node index>`,
      'store volume': `${pvc.metadata.name} ${pvc.spec.resources.requests.storage}`,
    });
    expect([WS_PORT, HTTP_PORT, AGENT_PORT].map(String)).toEqual([
      rows['orchestrator websocket port'],
      rows['orchestrator http port'],
      rows['agent port'],
    ]);
    expect(EAP_LABEL).toBe('kais.io/eap');
  });

  test('the overlay renders with kubectl kustomize: every object schema-valid, the Secrets the base needs, a config the orchestrator accepts', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kais-overlay-'));
    try {
      let n = 0;
      const overlay = renderOverlay(path.relative(dir, baseDir), 'kais', (k) => String(++n).padStart(2 * k, '0'));
      for (const [f, t] of overlay) fs.writeFileSync(path.join(dir, f), t);
      // the config the overlay ships is valid for the orchestrator (the model path as in this checkout)
      const cfg = JSON.parse(overlay.get('orchestrator.json')!);
      expect(Object.keys(cfg.agentTokens)).toHaveLength(topologyOf(loadScenario('kais')).numEaps);
      fs.writeFileSync(path.join(dir, 'local.json'), JSON.stringify({ ...cfg, checkpoint: path.join(root, 'models', 'kais-cmmac.bin') }));
      const read = readConfig(path.join(dir, 'local.json'));
      expect(read.executor).toBe('kubernetes');
      expect(read.kubernetes).toMatchObject({ kubeconfig: null, namespace: NAMESPACE });
      if (spawnSync('kubectl', ['version', '--client'], { stdio: 'ignore' }).status !== 0) {
        console.warn('kubectl is not on PATH: the overlay is not rendered here (the base was checked above)');
        return;
      }
      const rendered = (yaml.loadAll(execFileSync('kubectl', ['kustomize', dir], { encoding: 'utf8' })) as Obj[]).filter(Boolean);
      expect(rendered).toHaveLength(readBase().length + 2);
      // kustomize folds a Secret's base64 over lines, which the API server's (Go) decoder skips; the schema's "byte" format does not
      for (const o of rendered)
        if (o.kind === 'Secret') for (const k of Object.keys(o.data)) o.data[k] = String(o.data[k]).replace(/\s+/g, '');
      for (const o of rendered) expect(() => validate(o)).not.toThrow();
      for (const [name, keys] of Object.entries(secretsNeeded())) {
        const s = rendered.find((o) => o.kind === 'Secret' && o.metadata.name === name);
        expect(s?.metadata.namespace).toBe(NAMESPACE);
        expect(Object.keys(s!.data).sort()).toEqual([...keys].sort());
      }
      const cfgBack = JSON.parse(
        Buffer.from(rendered.find((o) => o.metadata.name === 'kais-orchestrator-config')!.data['orchestrator.json'], 'base64').toString(),
      );
      expect(cfgBack).toEqual(cfg);
      // every Secret a pod mounts exists or is optional
      const secrets = new Set(rendered.filter((o) => o.kind === 'Secret').map((o) => o.metadata.name));
      for (const o of rendered.filter((x) => x.kind === 'Deployment' || x.kind === 'DaemonSet'))
        for (const v of o.spec.template.spec.volumes.filter((x: any) => x.secret))
          expect(secrets.has(v.secret.secretName) || v.secret.optional === true).toBe(true);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('Dockerfile', () => {
  test('multi-stage, npm ci --omit=dev, the shipped models inside, runs as a numeric non-root user', () => {
    const text = fs.readFileSync(path.join(root, 'Dockerfile'), 'utf8');
    expect(text.match(/^FROM /gm)!.length).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^RUN npm ci --omit=dev/m);
    expect(text).toMatch(/^COPY models \.\/models$/m);
    const user = /^USER (\d+)/m.exec(text);
    expect(Number(user?.[1])).toBeGreaterThan(0);
    // the image's user is the pods' user
    const pod = readBase().find((o) => o.kind === 'Deployment')!.spec.template.spec.containers[0];
    expect(pod.securityContext.runAsUser).toBe(Number(user![1]));
    expect(fs.readFileSync(path.join(root, 'README.md'), 'utf8')).toMatch(/Dockerfile/);
  });
});
