// IPVS real servers under a Local traffic policy (internal and external) when no usable local
// endpoint exists, with remote terminating endpoints around: upstream's syncEndpoint uses the
// local endpoints when there are any (ready ones, else local serving-terminating ones), and
// otherwise the cluster endpoints (PR 97081), which exist only when the port uses Cluster
// endpoints at all (externally accessible, or internalTrafficPolicy=Cluster). Expected values
// worked out from upstream's CategorizeEndpoints + syncEndpoint.
import test from 'ava';
import { destinationsFor } from '../../../../src/proxier/ipvs/index.ts';
import { fallsBackToCluster } from '../../../../src/proxier/ipvs/plan.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';

const NODE = 'node-a';
const REMOTE = 'node-b';
const readyRemote = ep('10.0.0.1', { node: REMOTE });
const termRemote = ep('10.0.0.2', { node: REMOTE, ready: false, serving: true, terminating: true });
/** Serving left unset: the API (and upstream) read it as true. */
const termRemoteUnset = ep('10.0.0.4', { node: REMOTE, ready: false, terminating: true });
const termLocal = ep('10.0.0.3', { node: NODE, ready: false, serving: true, terminating: true });
const goneLocal = ep('10.0.0.5', { node: NODE, ready: false, serving: false, terminating: true });

interface Row {
  name: string;
  nodePort: boolean;
  eps: ReturnType<typeof ep>[];
  /** Real servers of the cluster-IP VS and of the node-port VS; any = hasAnyEndpoints. */
  internal: string[];
  external?: string[];
  /** The external VSes fell back to remote endpoints: listed in KUBE-NO-LOCAL-ENDPOINTS. */
  externalFallback?: boolean;
  any: boolean;
}

const rows: Row[] = [
  {
    name: 'remote ready and remote terminating: the ready one',
    nodePort: true,
    eps: [readyRemote, termRemote],
    internal: ['10.0.0.1'],
    external: ['10.0.0.1'],
    externalFallback: true,
    any: true,
  },
  {
    name: 'only a remote terminating one: it',
    nodePort: true,
    eps: [termRemote],
    internal: ['10.0.0.2'],
    external: ['10.0.0.2'],
    externalFallback: true,
    any: true,
  },
  {
    name: 'remote terminating, serving unset: it',
    nodePort: true,
    eps: [termRemoteUnset],
    internal: ['10.0.0.4'],
    external: ['10.0.0.4'],
    externalFallback: true,
    any: true,
  },
  {
    name: 'a local terminating one beats a remote ready one',
    nodePort: true,
    eps: [termLocal, readyRemote],
    internal: ['10.0.0.3'],
    external: ['10.0.0.3'],
    externalFallback: false,
    any: true,
  },
  {
    name: 'local not serving, remote terminating: the remote one',
    nodePort: true,
    eps: [goneLocal, termRemote],
    internal: ['10.0.0.2'],
    external: ['10.0.0.2'],
    externalFallback: true,
    any: true,
  },
  {
    name: 'ClusterIP only, remote ready and terminating: none (no Cluster endpoints used)',
    nodePort: false,
    eps: [readyRemote, termRemote],
    internal: [],
    any: true,
  },
  {
    name: 'ClusterIP only, remote terminating with serving unset: none, but endpoints exist',
    nodePort: false,
    eps: [termRemoteUnset],
    internal: [],
    any: true,
  },
  {
    name: 'ClusterIP only, local terminating: it',
    nodePort: false,
    eps: [termLocal, readyRemote],
    internal: ['10.0.0.3'],
    any: true,
  },
];

for (const row of rows) {
  test(`iTP=Local${row.nodePort ? ', eTP=Local NodePort' : ''}: ${row.name}`, (t) => {
    const { t: tracker } = newTracker({ nodeName: NODE });
    const port = { name: 'p', protocol: 'TCP', port: 80, ...(row.nodePort ? { nodePort: 30080 } : {}) };
    tracker.onService(
      undefined,
      svc('s', {
        clusterIP: '10.96.0.1',
        type: row.nodePort ? 'NodePort' : 'ClusterIP',
        ports: [port],
        iTP: 'Local',
        ...(row.nodePort ? { eTP: 'Local' } : {}),
      }),
    );
    tracker.onEndpointSlice(slice('s-1', 's', row.eps), false);
    const { desired } = tracker.checkout();
    const info = [...desired.services.values()][0]!;
    const sel = desired.selections.get(info.id);
    t.is(sel?.hasAnyEndpoints ?? false, row.any);
    t.deepEqual(
      destinationsFor(sel, info.internalPolicyLocal).map((e) => e.ip),
      row.internal,
      'cluster-IP VS',
    );
    if (row.external)
      t.deepEqual(
        destinationsFor(sel, info.externalPolicyLocal).map((e) => e.ip),
        row.external,
        'node-port VS',
      );
    if (row.externalFallback !== undefined)
      t.is(fallsBackToCluster(sel, info.externalPolicyLocal), row.externalFallback, 'external fallback');
  });
}
