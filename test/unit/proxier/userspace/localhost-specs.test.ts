// nftables mode's localhost NodePort listeners (KubeProxyNFTablesLocalhostNodePorts): which node
// ports get one on loopback, over which endpoints, as upstream's localnodeportproxy.
import test from 'ava';
import { localhostNodePortSpecs } from '../../../../src/proxier/userspace/localhost-specs.ts';
import { ep, newTracker, NODE, slice, svc } from '../../model/helpers.ts';

const PORTS = [{ name: 'p', protocol: 'TCP', port: 8080 }];
const nodePort = (n: number, protocol = 'TCP') => [{ name: 'p', protocol, port: 80, nodePort: n }];

function desired(nodePortAddresses: string[]) {
  const { t: c } = newTracker({ clusterCIDRs: ['10.0.0.0/8'], nodePortAddresses });
  const eps = [ep('10.1.0.1', { ready: true, node: NODE }), ep('10.1.0.2', { ready: true, node: 'node-b' })];
  const add = (name: string, ip: string, o: Parameters<typeof svc>[1], endpoints = eps) => {
    c.onService(undefined, svc(name, { clusterIP: ip, ...o }));
    c.onEndpointSlice(slice(`${name}-1`, name, endpoints, { ports: PORTS }), false);
  };
  add('web', '172.30.0.10', { type: 'NodePort', ports: nodePort(30080), affinity: 'ClientIP', timeout: 600 });
  add('local', '172.30.0.11', { type: 'NodePort', ports: nodePort(30081), eTP: 'Local' });
  add('nolocal', '172.30.0.12', { type: 'NodePort', ports: nodePort(30082), eTP: 'Local' }, [eps[1]!]);
  add('dns', '172.30.0.13', { type: 'NodePort', ports: nodePort(30053, 'UDP') });
  add('empty', '172.30.0.14', { type: 'NodePort', ports: nodePort(30084) }, []);
  add('internal', '172.30.0.15', { ports: [{ name: 'p', protocol: 'TCP', port: 80 }] });
  return c.checkout().desired;
}

test('a listener per TCP node port with endpoints: cluster endpoints (local and remote), local ones with eTP=Local, affinity', (t) => {
  const specs = localhostNodePortSpecs(desired(['localhost', '10.0.0.0/8']));
  t.deepEqual(
    specs.map((s) => ({
      name: s.name,
      port: s.listenPort,
      backends: s.backends.map((b) => b.ip),
      aff: s.affinitySeconds,
    })),
    [
      { name: 'default/web:p', port: 30080, backends: ['10.1.0.1', '10.1.0.2'], aff: 600 },
      { name: 'default/local:p', port: 30081, backends: ['10.1.0.1'], aff: 0 },
    ],
  );
  t.true(specs.every((s) => s.protocol === 'TCP' && s.id === `localhost-nodeport/tcp/${s.listenPort}`));
});

test('no listener unless nodePortAddresses asks for loopback ("all" does not, as upstream)', (t) => {
  t.deepEqual(localhostNodePortSpecs(desired(['all'])), []);
  t.deepEqual(localhostNodePortSpecs(desired(['10.0.0.0/8'])), []);
  t.is(localhostNodePortSpecs(desired(['0.0.0.0/0', '127.0.0.1/32'])).length, 2);
});
