// Kernel object names derived from Kubernetes names: bounded in bytes (the kernel's limit),
// free of what the kernel cuts at (NUL), and distinct for distinct service ports.
import test from 'ava';
import type { ServicePortId, ServicePortInfo } from '../../../../src/model/index.ts';
import { affinitySet, externalChain, serviceChain } from '../../../../src/proxier/nftables/names.ts';
import { newTracker, svc } from '../../model/helpers.ts';

function portNamed(namespace: string, name: string): ServicePortInfo {
  const { t } = newTracker();
  t.onService(undefined, svc('web', { affinity: 'ClientIP' }));
  const info = [...t.checkout().desired.services.values()][0]!;
  // A name the model refuses, as a future source or a bug could still bring one to a proxier.
  return { ...info, namespace, name, id: `${namespace}/${name}:p/TCP` as ServicePortId };
}

const bytes = (s: string): number => Buffer.byteLength(s, 'utf8');
const EP = { ip: 'fd00::1234:5678:9abc:def0', port: 65535 };

for (const [label, name] of [
  ['a NUL byte', 'web\0x'],
  ['200 × é', 'é'.repeat(200)],
  ['a newline and ANSI escapes', 'web\n\u001b[31m'],
  ['250 × 😀', '😀'.repeat(250)],
] as const) {
  test(`names from a Service name with ${label} are at most 200 bytes of printable ASCII`, (t) => {
    const p = portNamed('default', name);
    for (const n of [serviceChain(p), externalChain(p), affinitySet(p, EP)]) {
      t.true(bytes(n) <= 200, n);
      t.regex(n, /^[A-Za-z0-9._:/-]+$/);
    }
  });
}

test('names that differ only where they are sanitized or cut stay distinct', (t) => {
  const a = portNamed('default', 'é'.repeat(200));
  const b = portNamed('default', 'è'.repeat(200));
  const c = portNamed('default', `${'x'.repeat(250)}a`);
  const d = portNamed('default', `${'x'.repeat(250)}b`);
  const names = [a, b, c, d].flatMap((p) => [serviceChain(p), affinitySet(p, EP)]);
  t.is(new Set(names).size, names.length);
});

test('ordinary names are unchanged: operators and existing tables keep them', (t) => {
  const p = portNamed('default', 'web');
  t.regex(serviceChain(p), /^service-[A-Z0-9]{8}-default\/web\/tcp\/p$/);
  t.regex(affinitySet(p, { ip: '10.0.0.1', port: 80 }), /^affinity-[A-Z0-9]{8}-default\/web\/tcp\/p__10\.0\.0\.1\/80$/);
});
