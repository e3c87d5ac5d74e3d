// The pick in KUBE-SVC/SVL per the load-balancing choice: round-robin writes xt_statistic's nth
// mode (every n-th, every n-1-th, ... of the connections reaching each rule), what iptables
// cannot do keeps upstream's random probabilities.
import test from 'ava';
import { LOAD_BALANCING_ANNOTATION } from '../../../../src/model/index.ts';
import { endpointChainName, hash16, type IptablesOptions } from '../../../../src/proxier/iptables/index.ts';
import { chainLines, cluster, ep, saveText, slice, svc } from './harness.ts';

const SVC = `KUBE-SVC-${hash16('default/s:ptcp')}`;
const sep = (ip: string) => endpointChainName({ portName: 'default/s:p', protocol: 'tcp' }, { key: `${ip}:8080` });
const PORTS = [{ name: 'p', protocol: 'TCP', port: 8080 }];
const IPS = ['10.1.0.1', '10.1.0.2', '10.1.0.3'];

function picks(annotation: string | undefined, opts: IptablesOptions = {}, affinity = false): string[] {
  const c = cluster();
  const s = svc('s', { clusterIP: '172.30.0.10', ...(affinity ? { affinity: 'ClientIP', timeout: 300 } : {}) });
  if (annotation !== undefined) s.metadata!.annotations = { [LOAD_BALANCING_ANNOTATION]: annotation };
  c.onService(undefined, s);
  c.onEndpointSlice(
    slice(
      's-1',
      's',
      IPS.map((ip) => ep(ip)),
      { ports: PORTS },
    ),
    false,
  );
  return chainLines(saveText(c.checkout().desired, opts), SVC).slice(1);
}

const comment = (ip: string) => `-m comment --comment "default/s:p -> ${ip}:8080"`;
const RANDOM = [
  `-A ${SVC} ${comment(IPS[0]!)} -m statistic --mode random --probability 0.33333333349 -j ${sep(IPS[0]!)}`,
  `-A ${SVC} ${comment(IPS[1]!)} -m statistic --mode random --probability 0.50000000000 -j ${sep(IPS[1]!)}`,
  `-A ${SVC} ${comment(IPS[2]!)} -j ${sep(IPS[2]!)}`,
];
const ROUND_ROBIN = [
  `-A ${SVC} ${comment(IPS[0]!)} -m statistic --mode nth --every 3 --packet 0 -j ${sep(IPS[0]!)}`,
  `-A ${SVC} ${comment(IPS[1]!)} -m statistic --mode nth --every 2 --packet 0 -j ${sep(IPS[1]!)}`,
  `-A ${SVC} ${comment(IPS[2]!)} -j ${sep(IPS[2]!)}`,
];

test('no annotation, no node default: upstream random probabilities', (t) => {
  t.deepEqual(picks(undefined), RANDOM);
});

test('round-robin: statistic nth, every 3 then every 2 of what is left, the last endpoint takes the rest', (t) => {
  t.deepEqual(picks('round-robin'), ROUND_ROBIN);
  t.deepEqual(picks(' round-robin '), ROUND_ROBIN, 'the value is trimmed');
});

test('the node default (--load-balancing round-robin) applies; a Service asking random keeps random', (t) => {
  t.deepEqual(picks(undefined, { loadBalancing: 'round-robin' }), ROUND_ROBIN);
  t.deepEqual(picks('random', { loadBalancing: 'round-robin' }), RANDOM);
});

test('consistent-hash, least-connection and unknown values: iptables cannot, so random stays', (t) => {
  for (const v of ['consistent-hash', 'least-connection', 'maglev']) t.deepEqual(picks(v), RANDOM, v);
  t.deepEqual(picks('least-connection', { loadBalancing: 'round-robin' }), ROUND_ROBIN, 'the node default then');
});

test('ClientIP affinity: the recent checks still come first; round-robin picks only new clients', (t) => {
  const lines = picks('round-robin', {}, true);
  t.is(lines.length, 6);
  t.true(lines.slice(0, 3).every((l) => l.includes('-m recent --rcheck')));
  t.deepEqual(lines.slice(3), ROUND_ROBIN);
});
