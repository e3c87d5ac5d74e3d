// Connection settings: --kubeconfig (TLS and credentials as it says), --master, and the
// errors a connection can meet. TLS runs against the test API server with a certificate
// made here by openssl (tests may start programs; src/ never does).

import test from 'ava';
import type { ExecutionContext } from 'ava';
import { execFileSync } from 'node:child_process';
import { selfSignedLoopbackCert } from '../../helpers/tls.ts';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { memoryLogger } from '../../../src/base/logger.ts';
import {
  ApiError,
  ClientNodeApi,
  isGone,
  KubeConfigError,
  loadKubeConfig,
  parseWatchLine,
  WatchDecodeError,
} from '../../../src/sources/kube-api.ts';
import { KubernetesSource } from '../../../src/sources/kubernetes.ts';
import { FakeApiServer } from '../../helpers/fake-apiserver.ts';
import { Recorder, waitFor } from './recorder.ts';

const work = mkdtempSync(join(tmpdir(), 'kpts-tls-'));
test.after.always(() => rmSync(work, { recursive: true, force: true }));

const selfSigned = (name: string): { key: string; cert: string } => selfSignedLoopbackCert(work, name);

/** A CA and a client certificate it signed, as kubeadm's kubeconfigs carry. */
function clientCertificate(): { ca: string; cert: string; key: string } {
  const f = (n: string) => join(work, n);
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  execFileSync(
    '/usr/bin/openssl',
    ['req', '-x509', ...ec, '-keyout', f('ca.key'), '-out', f('ca.crt'), '-days', '1', '-subj', '/CN=test-ca'],
    { stdio: 'ignore' },
  );
  execFileSync(
    '/usr/bin/openssl',
    ['req', '-new', ...ec, '-keyout', f('client.key'), '-out', f('client.csr'), '-subj', '/CN=system:kube-proxy'],
    { stdio: 'ignore' },
  );
  execFileSync(
    '/usr/bin/openssl',
    [
      'x509',
      '-req',
      '-in',
      f('client.csr'),
      '-CA',
      f('ca.crt'),
      '-CAkey',
      f('ca.key'),
      '-CAcreateserial',
      '-out',
      f('client.crt'),
      '-days',
      '1',
    ],
    { stdio: 'ignore' },
  );
  return {
    ca: readFileSync(f('ca.crt'), 'utf8'),
    cert: readFileSync(f('client.crt'), 'utf8'),
    key: readFileSync(f('client.key'), 'utf8'),
  };
}

function kubeconfig(
  name: string,
  server: string,
  caPem: string,
  token: string | undefined,
  client?: { cert: string; key: string },
): string {
  const path = join(work, `${name}.kubeconfig`);
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const user = token
    ? `    token: ${token}\n`
    : client
      ? `    client-certificate-data: ${b64(client.cert)}\n    client-key-data: ${b64(client.key)}\n`
      : '    {}\n';
  writeFileSync(
    path,
    `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: ${server}
    certificate-authority-data: ${Buffer.from(caPem).toString('base64')}
users:
- name: u
  user:
${user}contexts:
- name: ctx
  context: {cluster: c, user: u}
current-context: ctx
`,
  );
  return path;
}

async function run(t: ExecutionContext, api: ClientNodeApi) {
  const logger = memoryLogger();
  const source = new KubernetesSource({ api, nodeName: 'n', logger, backoff: { initialMs: 10, maxMs: 50, jitter: 0 } });
  const rec = new Recorder();
  t.teardown(() => source.stop());
  await source.start(rec);
  return { source, rec, logger };
}

test("HTTPS with the kubeconfig's CA and bearer token; --master overrides only the server", async (t) => {
  const tls = selfSigned('good');
  const server = await FakeApiServer.start({ tls, token: 's3cret' });
  t.teardown(() => server.close());
  server.create({ kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: {} });
  const path = kubeconfig('good', 'https://192.0.2.1:6443', tls.cert, 's3cret');
  const kc = loadKubeConfig({ kubeconfig: path, master: server.url });
  t.is(kc.getCurrentCluster()?.server, server.url);
  t.false(kc.getCurrentCluster()?.skipTLSVerify ?? false);
  const { source, rec } = await run(t, new ClientNodeApi(kc));
  await source.waitForSync(AbortSignal.timeout(10_000));
  t.true(rec.services.has('default/web'));
});

test("a server certificate the kubeconfig's CA did not sign is refused (and retried)", async (t) => {
  const served = selfSigned('served');
  const other = selfSigned('other');
  const server = await FakeApiServer.start({ tls: served });
  t.teardown(() => server.close());
  const kc = loadKubeConfig({ kubeconfig: kubeconfig('other', server.url, other.cert, undefined) });
  const { source, logger } = await run(t, new ClientNodeApi(kc));
  await waitFor(() => logger.records.filter((r) => r.msg === 'list/watch failed; retrying').length >= 4, 'retries');
  t.false(source.hasSynced());
  t.is(server.requests.length, 0, 'no request got through the TLS handshake');
  const errors = logger.records.map((r) => String(r.fields['error'] ?? '')).join('\n');
  // Named: the cause with its code, the CA it was checked against, what to change; not Node's
  // advice to run Node.js with --use-system-ca.
  t.regex(errors, /certificate \(https:\/\/127\.0\.0\.1:\d+\) is refused: self-signed certificate/);
  t.regex(errors, /\(DEPTH_ZERO_SELF_SIGNED_CERT\)/);
  t.regex(errors, /checked against the kubeconfig's certificate-authority-data/);
  t.regex(errors, /give the CA that signed the server's certificate as certificate-authority/);
  t.notRegex(errors, /use-system-ca|Node\.js/);
});

test('a server certificate refused with no CA configured (--master), or in a pod: the CA in use is named', async (t) => {
  const tls = selfSigned('no-ca');
  const server = await FakeApiServer.start({ tls });
  t.teardown(() => server.close());
  const { logger } = await run(t, new ClientNodeApi(loadKubeConfig({ master: server.url })));
  await waitFor(() => logger.records.some((r) => r.msg === 'list/watch failed; retrying'), 'refused');
  const error = String(logger.records.find((r) => r.msg === 'list/watch failed; retrying')!.fields['error']);
  t.regex(error, /checked against the system's CAs \(no CA configured/);
  t.notRegex(error, /use-system-ca/);

  const root = join(work, 'pod-wrong-ca');
  const sa = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'ca.crt'), selfSigned('pod-other').cert);
  writeFileSync(join(sa, 'token'), 't');
  const kc = loadKubeConfig(
    { inClusterRoot: root },
    { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: new URL(server.url).port },
  );
  const pod = await run(t, new ClientNodeApi(kc));
  await waitFor(() => pod.logger.records.some((r) => r.msg === 'list/watch failed; retrying'), 'refused in a pod');
  const inPod = String(pod.logger.records.find((r) => r.msg === 'list/watch failed; retrying')!.fields['error']);
  t.regex(inPod, /\(DEPTH_ZERO_SELF_SIGNED_CERT\); checked against the service account's CA file \S+ca\.crt/);
  t.regex(inPod, /the service account's ca\.crt must hold the CA that signed/);
});

test('client certificates from the kubeconfig (mutual TLS)', async (t) => {
  const tls = selfSigned('mtls-server');
  const client = clientCertificate();
  const server = await FakeApiServer.start({ tls: { ...tls, clientCa: client.ca } });
  t.teardown(() => server.close());
  server.create({ kind: 'Service', metadata: { name: 'web', namespace: 'default' }, spec: {} });
  const good = loadKubeConfig({ kubeconfig: kubeconfig('mtls', server.url, tls.cert, undefined, client) });
  const { source, rec } = await run(t, new ClientNodeApi(good));
  await source.waitForSync(AbortSignal.timeout(10_000));
  t.true(rec.services.has('default/web'));
  // Without the client certificate, the handshake fails.
  const anonymous = loadKubeConfig({ kubeconfig: kubeconfig('no-cert', server.url, tls.cert, undefined) });
  const other = await run(t, new ClientNodeApi(anonymous));
  await waitFor(() => other.logger.records.some((r) => r.msg === 'list/watch failed; retrying'), 'refused');
  t.false(other.source.hasSynced());
});

test("in-cluster: the service account's CA and token, to KUBERNETES_SERVICE_HOST:PORT", async (t) => {
  const tls = selfSigned('in-cluster');
  const server = await FakeApiServer.start({ tls, token: 'sa-token' });
  t.teardown(() => server.close());
  server.create({ kind: 'Service', metadata: { name: 'kubernetes', namespace: 'default' }, spec: {} });
  const root = join(work, 'pod');
  const sa = join(root, 'var/run/secrets/kubernetes.io/serviceaccount');
  mkdirSync(sa, { recursive: true });
  writeFileSync(join(sa, 'ca.crt'), tls.cert);
  writeFileSync(join(sa, 'token'), 'sa-token');
  writeFileSync(join(sa, 'namespace'), 'kube-system');
  const port = new URL(server.url).port;
  const kc = loadKubeConfig(
    { inClusterRoot: root },
    { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: port },
  );
  t.is(kc.getCurrentCluster()?.server, `https://127.0.0.1:${port}`);
  const { source, rec } = await run(t, new ClientNodeApi(kc));
  await source.waitForSync(AbortSignal.timeout(10_000));
  t.true(rec.services.has('default/kubernetes'));
});

test('a missing token gets 401, reported and retried', async (t) => {
  const server = await FakeApiServer.start({ token: 'x' });
  t.teardown(() => server.close());
  const { source, logger } = await run(t, new ClientNodeApi(loadKubeConfig({ master: server.url })));
  await waitFor(() => logger.records.some((r) => String(r.fields['error']).includes('401')), '401 logged');
  t.false(source.hasSynced());
});

test('loadKubeConfig: nothing given outside a pod is an error; plain-HTTP masters are allowed', (t) => {
  t.throws(() => loadKubeConfig({}, {}), { instanceOf: KubeConfigError });
  t.throws(() => loadKubeConfig({ kubeconfig: join(work, 'missing') }), { instanceOf: KubeConfigError });
  const http = loadKubeConfig({ master: 'http://127.0.0.1:8001' });
  t.is(http.getCurrentCluster()?.server, 'http://127.0.0.1:8001');
  t.true(http.getCurrentCluster()?.skipTLSVerify);
  const https = loadKubeConfig({ master: 'https://10.0.0.1:6443' });
  t.false(https.getCurrentCluster()?.skipTLSVerify);
});

test('parseWatchLine: events, and lines that are not events', (t) => {
  t.deepEqual(parseWatchLine('/p', '{"type":"ADDED","object":{"a":1}}'), { type: 'ADDED', object: { a: 1 } });
  t.throws(() => parseWatchLine('/p', '{"type":"ADDED"'), { instanceOf: WatchDecodeError });
  t.throws(() => parseWatchLine('/p', '{"type":"EXPLODED","object":{}}'), { instanceOf: WatchDecodeError });
  t.throws(() => parseWatchLine('/p', '{"type":"ADDED","object":null}'), { instanceOf: WatchDecodeError });
  t.true(isGone(new ApiError('/p', 410, 'Expired', 'too old')));
});
