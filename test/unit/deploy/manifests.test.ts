// deploy/: every object validated against the Kubernetes OpenAPI schemas (kubernetes-models:
// validators and TypeScript types generated from the API's OpenAPI definitions; the types
// add what the schemas leave open, unknown fields), and the DaemonSet, ConfigMap and RBAC
// checked for what they must say. The daemon's real requests are checked against the
// ClusterRole in test/kernel/image.test.ts.

import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import test from 'ava';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import ts from 'typescript';
import { parseCommandLine } from '../../../src/config/index.ts';
import type { KObject } from '../../helpers/fake-apiserver.ts';
import type { PolicyRule } from '../../helpers/deploy-manifests.ts';
import {
  DEPLOY_DIR,
  loadDeployManifests,
  manifestOf,
  requestAttributes,
  rulesAllow,
} from '../../helpers/deploy-manifests.ts';

const REPO = join(DEPLOY_DIR, '..');
const MODELS: Record<string, { validate(o: KObject): void; type: string }> = {
  'apps/v1 DaemonSet': {
    validate: (o) => new DaemonSet(o as never).validate(),
    type: "import('kubernetes-models/apps/v1/DaemonSet').IDaemonSet",
  },
  'v1 ConfigMap': {
    validate: (o) => new ConfigMap(o as never).validate(),
    type: "import('kubernetes-models/v1/ConfigMap').IConfigMap",
  },
  'v1 ServiceAccount': {
    validate: (o) => new ServiceAccount(o as never).validate(),
    type: "import('kubernetes-models/v1/ServiceAccount').IServiceAccount",
  },
  'rbac.authorization.k8s.io/v1 ClusterRole': {
    validate: (o) => new ClusterRole(o as never).validate(),
    type: "import('kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole').IClusterRole",
  },
  'rbac.authorization.k8s.io/v1 ClusterRoleBinding': {
    validate: (o) => new ClusterRoleBinding(o as never).validate(),
    type: "import('kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding').IClusterRoleBinding",
  },
};
const modelOf = (o: KObject) => MODELS[`${String(o['apiVersion'])} ${String(o['kind'])}`];

/**
 * Type-checks the objects as literals of their generated types: TypeScript's excess property
 * check finds fields the API does not have, at any depth (the schemas allow them). Returns
 * the diagnostics, one line each.
 */
function typeCheck(objects: readonly KObject[]): string[] {
  const file = join(REPO, 'test/unit/deploy/.manifests-typecheck.ts');
  const source = objects.map((o, i) => `export const m${i}: ${modelOf(o)!.type} = ${JSON.stringify(o)};`).join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    target: ts.ScriptTarget.ES2022,
    skipLibCheck: true,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (name, lang, ...rest) =>
    name === file ? ts.createSourceFile(name, source, lang) : getSourceFile(name, lang, ...rest);
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (name) => name === file || fileExists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
}

const all = loadDeployManifests();
const objects = all.map((m) => m.obj);
const daemonSet = manifestOf(all, 'DaemonSet', 'kube-proxy-ts');
const pod = daemonSet['spec'].template.spec;
const container = pod.containers[0];

test('every object is of a known kind and valid against its OpenAPI schema', (t) => {
  t.deepEqual([...new Set(all.map((m) => m.file))], ['configmap.yaml', 'daemonset.yaml', 'rbac.yaml']);
  for (const { file, obj } of all) {
    const model = modelOf(obj);
    t.truthy(model, `${file}: ${String(obj['apiVersion'])} ${String(obj['kind'])} is not one this test knows`);
    t.notThrows(() => model!.validate(obj), `${file}: ${String(obj['kind'])}`);
  }
});

test('the schemas reject a wrong type, and the types an unknown field (the checks can fail)', (t) => {
  const wrongType = structuredClone(daemonSet);
  wrongType['spec'].template.spec.hostNetwork = 'yes';
  t.throws(() => modelOf(wrongType)!.validate(wrongType), { message: /hostNetwork must be boolean/ });
  const unknown = structuredClone(daemonSet);
  unknown['spec'].template.spec.containers[0].livenesProbe = unknown['spec'].template.spec.containers[0].livenessProbe;
  const errors = typeCheck([unknown]);
  t.true(
    errors.some((e) => e.includes('livenesProbe') && e.includes('IContainer')),
    errors.join('\n'),
  );
});

test('no field the API does not have (TypeScript types generated from the OpenAPI definitions)', (t) => {
  t.deepEqual(typeCheck(objects), []);
});

test('the DaemonSet: host network, node-critical, all taints tolerated, rolling update, probes, the image of this version', (t) => {
  const spec = daemonSet['spec'];
  t.is(daemonSet['metadata'].namespace, 'kube-system');
  t.deepEqual(spec.updateStrategy, { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } });
  t.true(pod.hostNetwork);
  t.is(pod.priorityClassName, 'system-node-critical');
  t.deepEqual(pod.tolerations, [{ operator: 'Exists' }]);
  t.is(pod.nodeSelector['kubernetes.io/os'], 'linux');
  const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  t.is(container.image, `kube-proxy-ts:${version}`);
  t.is(container.command, undefined, "the image's entry point runs the daemon; only flags are given");
  t.deepEqual(container.livenessProbe.httpGet, { path: '/livez', port: 10256 });
  t.deepEqual(container.readinessProbe.httpGet, { path: '/healthz', port: 10256 });
  t.deepEqual(
    container.ports.map((p: KObject) => p['containerPort']),
    [10256, 10249],
  );
  t.deepEqual(container.env, [{ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }]);
  // The mounts: the configuration only (see deploy/README.md for why not /lib/modules, xtables.lock).
  t.deepEqual(pod.volumes, [{ name: 'config', configMap: { name: 'kube-proxy-ts' } }]);
  t.deepEqual(container.volumeMounts, [{ name: 'config', mountPath: '/var/lib/kube-proxy-ts', readOnly: true }]);
  t.deepEqual(container.securityContext, { privileged: true });
  t.is(spec.selector.matchLabels['app.kubernetes.io/name'], spec.template.metadata.labels['app.kubernetes.io/name']);
});

test("the DaemonSet's flags and the ConfigMap's KubeProxyConfiguration parse as the daemon parses them: nftables, in-cluster", (t) => {
  const configMap = manifestOf(all, 'ConfigMap', 'kube-proxy-ts');
  const files: Record<string, string> = { '/var/lib/kube-proxy-ts/config.conf': configMap['data']['config.conf'] };
  const args = (container.args as string[]).map((a) => a.replace('$(NODE_NAME)', 'node-7'));
  const r = parseCommandLine(args, {
    readFile: (p) => {
      if (files[p] === undefined) throw new Error(`no such file ${p}`);
      return files[p];
    },
  });
  if (r.kind !== 'run') return t.fail(`${r.stderr}${r.stdout}`);
  t.deepEqual(r.warnings, []);
  t.is(r.config.mode, 'nftables');
  t.is(r.config.hostnameOverride, 'node-7');
  t.is(r.config.clientConnection.kubeconfig, '', 'in-cluster configuration');
  t.is(r.config.healthzBindAddress, '0.0.0.0:10256');
  t.is(r.config.metricsBindAddress, '127.0.0.1:10249');
});

test("RBAC: the service account is bound to exactly upstream kube-proxy's grants, less what kube-proxy-ts never asks for", (t) => {
  const sa = manifestOf(all, 'ServiceAccount', 'kube-proxy-ts');
  t.is(pod.serviceAccountName, sa['metadata'].name);
  const binding = manifestOf(all, 'ClusterRoleBinding', 'kube-proxy-ts');
  t.deepEqual(binding['subjects'], [
    { kind: 'ServiceAccount', name: sa['metadata'].name, namespace: sa['metadata'].namespace },
  ]);
  t.deepEqual(binding['roleRef'], {
    apiGroup: 'rbac.authorization.k8s.io',
    kind: 'ClusterRole',
    name: 'kube-proxy-ts',
  });
  const rules = manifestOf(all, 'ClusterRole', 'kube-proxy-ts')['rules'] as PolicyRule[];
  const granted = new Set<string>();
  for (const r of rules)
    for (const g of r.apiGroups ?? [])
      for (const res of r.resources ?? []) for (const v of r.verbs) granted.add(`${v} ${g}/${res}`);
  t.deepEqual(
    [...granted].sort(),
    [
      'create /events',
      'create events.k8s.io/events',
      'get /nodes',
      'list /nodes',
      'list /services',
      'list discovery.k8s.io/endpointslices',
      'list networking.k8s.io/servicecidrs',
      'patch /events',
      'patch events.k8s.io/events',
      'watch /nodes',
      'watch /services',
      'watch discovery.k8s.io/endpointslices',
      'watch networking.k8s.io/servicecidrs',
    ].sort(),
  );
  t.false(
    rules.some((r) => [...(r.apiGroups ?? []), ...(r.resources ?? []), ...r.verbs].includes('*')),
    'no wildcards',
  );
});

test("requestAttributes and rulesAllow name requests as the API server's authoriser does", (t) => {
  t.deepEqual(requestAttributes('GET', '/api/v1/nodes', true), { verb: 'watch', group: '', resource: 'nodes' });
  t.deepEqual(requestAttributes('GET', '/api/v1/nodes/node-a', false), { verb: 'get', group: '', resource: 'nodes' });
  t.deepEqual(requestAttributes('GET', '/apis/discovery.k8s.io/v1/endpointslices', false), {
    verb: 'list',
    group: 'discovery.k8s.io',
    resource: 'endpointslices',
  });
  t.deepEqual(requestAttributes('POST', '/apis/events.k8s.io/v1/namespaces/default/events', false), {
    verb: 'create',
    group: 'events.k8s.io',
    resource: 'events',
  });
  t.is(requestAttributes('GET', '/version', false), undefined);
  const rules: PolicyRule[] = [{ apiGroups: [''], resources: ['services'], verbs: ['list'] }];
  t.true(rulesAllow(rules, { verb: 'list', group: '', resource: 'services' }));
  t.false(rulesAllow(rules, { verb: 'watch', group: '', resource: 'services' }));
  t.false(rulesAllow(rules, { verb: 'list', group: 'apps', resource: 'services' }));
});

test('the optional PodMonitor scrapes the DaemonSet pods on their metrics port; deploy/README.md states the request', (t) => {
  const [monitor, ...more] = loadDeployManifests(join(DEPLOY_DIR, 'optional')).filter(
    (m) => m.obj['kind'] === 'PodMonitor',
  );
  t.is(more.length, 0);
  const m = monitor!.obj;
  t.is(m['apiVersion'], 'monitoring.coreos.com/v1');
  t.is(m['metadata'].namespace, daemonSet['metadata'].namespace);
  t.deepEqual(m['spec'].selector.matchLabels, daemonSet['spec'].template.metadata.labels);
  const endpoint = m['spec'].podMetricsEndpoints[0];
  const port = (container.ports as KObject[]).find((p) => p['name'] === endpoint.port);
  t.is(port?.['containerPort'], 10249, 'the port the PodMonitor names is the metrics port');
  t.is(endpoint.path, '/metrics');
  // Prometheus reaches the pod's (node's) address: the README says to bind metrics there first.
  const readme = readFileSync(join(DEPLOY_DIR, 'README.md'), 'utf8');
  t.true(readme.includes('metricsBindAddress: 0.0.0.0:10249'));
  const request = container.resources.requests;
  t.true(
    readme.includes(`requests \`cpu: ${request.cpu}\` and \`memory: ${request.memory}\``),
    'the README names the manifest request',
  );
  t.regex(readme, new RegExp(`\\*\\*${request.memory}\\*\\* \\(the manifest's\\)`));
});
