// --feature-gates as upstream v1.37's kube-proxy takes them: its known gate list (held here, so a
// change to feature-gates-v1.37.ts is a deliberate one), an unknown name refused with exit 2
// naming it, GA and deprecated gates warned about, AllAlpha/AllBeta, and the KubeProxyIPVS gate.

import { createHash } from 'node:crypto';
import test from 'ava';
import { parseCommandLine } from '../../../src/config/cli.ts';
import { checkFeatureGates, featureEnabled, featureGateStates } from '../../../src/config/feature-gates.ts';
import { FEATURE_GATES_VERSION, KNOWN_FEATURE_GATES } from '../../../src/config/feature-gates-v1.37.ts';

test('the list is upstream v1.37: 270 gates, none twice, the network ones at their v1.37 stage', (t) => {
  t.is(FEATURE_GATES_VERSION, '1.37');
  const names = KNOWN_FEATURE_GATES.map(([n]) => n);
  t.is(names.length, 270);
  t.is(new Set(names).size, names.length);
  const spec = (n: string) => KNOWN_FEATURE_GATES.find(([name]) => name === n)?.slice(1);
  t.deepEqual(spec('KubeProxyNFTablesLocalhostNodePorts'), [false, 'ALPHA']);
  t.deepEqual(spec('KubeProxyIPVS'), [true, 'DEPRECATED']);
  t.deepEqual(spec('NFTablesNetlink'), [true, 'BETA']);
  t.deepEqual(spec('NFTablesProxyMode'), [true, '']);
  t.deepEqual(spec('PreferSameTrafficDistribution'), [true, '']);
  t.deepEqual(spec('ServiceTrafficDistribution'), [true, '']);
  t.deepEqual(spec('MultiCIDRServiceAllocator'), [true, '']);
  t.deepEqual(spec('ComponentFlagz'), [true, 'BETA']);
  t.deepEqual(spec('ComponentStatusz'), [true, 'BETA']);
  t.deepEqual(spec('AllAlpha'), [false, 'ALPHA']);
  t.deepEqual(spec('AllBeta'), [false, 'BETA']);
  // The whole list, name, default and stage: a digest, so that no entry changes unnoticed.
  const digest = createHash('sha256')
    .update(KNOWN_FEATURE_GATES.map((g) => g.join(' ')).join('\n'))
    .digest('hex');
  t.is(digest.slice(0, 16), 'cf171f242c4e936a');
});

test('an unknown gate on the command line: exit 2, one line naming it', (t) => {
  const r = parseCommandLine(['--feature-gates=KubeProxyNFTablesLocalhostNodePorts=true,NoSuchGate=true']);
  t.is(r.kind, 'exit');
  if (r.kind !== 'exit') return;
  t.is(r.code, 2);
  t.regex(r.stderr, /unrecognized feature gate: NoSuchGate/);
  t.notRegex(r.stderr, /KubeProxyNFTablesLocalhostNodePorts/);
  t.notRegex(r.stderr, /\n\s+at /, 'no stack trace');
});

test('an unknown gate in the config file is refused too', (t) => {
  const file =
    'apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\nfeatureGates:\n  Bogus: true\n';
  const r = parseCommandLine(['--config', '/etc/kp.yaml'], { readFile: () => file });
  t.is(r.kind, 'exit');
  if (r.kind === 'exit') t.regex(r.stderr, /featureGates: unrecognized feature gate: Bogus/);
});

test('GA and deprecated gates are accepted with upstream warnings; alpha and beta silently', (t) => {
  const c = checkFeatureGates({
    NFTablesProxyMode: true,
    KubeProxyIPVS: true,
    KubeProxyNFTablesLocalhostNodePorts: true,
  });
  t.is(c.unknown, undefined);
  t.deepEqual(c.warnings, [
    'featureGates: setting deprecated feature gate KubeProxyIPVS=true; it will be removed in a future release',
    'featureGates: setting GA feature gate NFTablesProxyMode=true; it will be removed in a future release',
  ]);
});

test('enablement: by name, else AllAlpha/AllBeta for the stage, else the default', (t) => {
  t.false(featureEnabled({}, 'KubeProxyNFTablesLocalhostNodePorts'));
  t.true(featureEnabled({ AllAlpha: true }, 'KubeProxyNFTablesLocalhostNodePorts'));
  t.false(
    featureEnabled(
      { AllAlpha: true, KubeProxyNFTablesLocalhostNodePorts: false },
      'KubeProxyNFTablesLocalhostNodePorts',
    ),
  );
  t.true(featureEnabled({}, 'ComponentStatusz'));
  t.false(featureEnabled({ ComponentStatusz: false }, 'ComponentStatusz'));
  t.true(featureEnabled({ AllBeta: true }, 'CoordinatedLeaderElection'));
  t.false(featureEnabled({ AllAlpha: true }, 'CoordinatedLeaderElection'));
  const states = featureGateStates({ AllAlpha: true });
  t.is(states.length, KNOWN_FEATURE_GATES.length);
  t.deepEqual(
    states.find((s) => s.name === 'AllAlpha'),
    { name: 'AllAlpha', stage: 'ALPHA', enabled: true },
  );
});

test('ipvs mode with KubeProxyIPVS=false is refused, as upstream v1.37', (t) => {
  const r = parseCommandLine(['--proxy-mode=ipvs', '--feature-gates=KubeProxyIPVS=false']);
  t.is(r.kind, 'exit');
  if (r.kind === 'exit') t.regex(r.stderr, /KubeProxyIPVS/);
  t.is(parseCommandLine(['--proxy-mode=ipvs']).kind, 'run');
});
