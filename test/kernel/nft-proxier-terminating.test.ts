// Terminating endpoints whose `serving` condition is unset, with real packets (issue 16 item 9):
// the API and upstream read an unset `serving` as true, so {ready: false, terminating: true}
// is a serving-terminating endpoint. A Service whose only endpoints are such remote ones has
// endpoints: Cluster traffic falls back to them, and Local traffic with no local endpoint is
// dropped (upstream's "no local endpoints" verdict), not rejected as for a Service with none.
// Set-up as in nft-proxier.test.ts (helpers/cluster.ts).
import test from 'ava';
import { ECHO, makeCluster, NODE_IP, podGateway, podIP } from '../helpers/cluster.ts';
import { ep, node, slice, svc } from '../unit/model/helpers.ts';

const P = new URL('./scenarios/nft-proxier.ts', import.meta.url).href;
const MODEL = { clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/16'] };

test.serial(
  'remote endpoints terminating with serving unset: Cluster traffic uses them; Local traffic is dropped, not rejected',
  async (t) => {
    const c = await makeCluster(t, 'termu', 2);
    await c.nodeAgent.call(P, 'start', MODEL);
    const terminating = { node: 'node-b', ready: false, terminating: true };
    const port = (p: number, nodePort?: number) => [
      { name: 'p', protocol: 'TCP', port: p, ...(nodePort ? { nodePort } : {}) },
    ];
    const r = await c.nodeAgent.call<{ errors: string[] }>(P, 'apply', {
      node: node('node-a', { internal: [NODE_IP] }),
      services: [
        svc('itp', { clusterIP: '10.96.0.95', ports: port(80), iTP: 'Local' }),
        svc('etp', { clusterIP: '10.96.0.96', type: 'NodePort', ports: port(80, 30096), eTP: 'Local' }),
      ],
      slices: [slice('itp-1', 'itp', [ep(podIP(0), terminating)]), slice('etp-1', 'etp', [ep(podIP(1), terminating)])],
    });
    t.deepEqual(r.errors, []);
    const tcp = (who: 'client' | 'node', ip: string, p: number) =>
      (who === 'client' ? c.clientAgent : c.nodeAgent).call<string>(ECHO, 'tcp', ip, p);

    t.is(
      await tcp('client', '10.96.0.95', 80),
      'ETIMEDOUT',
      'internalTrafficPolicy=Local, no local endpoint but some elsewhere: dropped',
    );
    t.is(
      await tcp('client', '10.96.0.96', 80),
      `pod2 ${podGateway(1)}`,
      'cluster IP (Cluster policy): the terminating endpoint answers',
    );
    t.is(
      await tcp('client', NODE_IP, 30096),
      'ETIMEDOUT',
      'externalTrafficPolicy=Local from outside, no local endpoint: dropped',
    );
    t.is(
      await tcp('node', NODE_IP, 30096),
      `pod2 ${podGateway(1)}`,
      'from the node itself: short-circuited to the cluster endpoints',
    );
  },
);
