// Stale chains and sets are removed in a transaction of their own, as upstream's nftables
// cleanup: when it fails the sync still succeeds, the failure is reported (the daemon counts
// kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total), and the next full sync retries.
import test from 'ava';
import { memoryLogger } from '../../../../src/base/logger.ts';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import type { NftTransaction } from '../../../../src/netlink/nftables/index.ts';
import { NftablesProxier, TABLE } from '../../../../src/proxier/nftables/index.ts';
import { ep, newTracker, slice, svc } from '../../model/helpers.ts';
import { problemText } from '../../../../src/proxier/types.ts';

/** Refuses every transaction that deletes a chain while `refuse` is set. */
class RefusingNft extends FakeNft {
  refuse = false;
  override async run(tx: NftTransaction, signal?: AbortSignal) {
    if (this.refuse && tx.operations.some((op) => op.verb === 'delete' && op.obj.kind === 'chain'))
      throw new Error('EBUSY: refused by the test');
    return super.run(tx, signal);
  }
}

/**
 * How many chains of the table have this name (b's two endpoints use the pick-internal-2 picker, a's pick-
 * internal-1).
 */
const chainsOf = (nft: FakeNft, name: string): number =>
  nft
    .dump()
    .split('\n')
    .filter((l) => /^add chain /.test(l) && l.split(' ').includes(name)).length;

test('a failed cleanup of stale chains does not fail the sync; it is reported and retried', async (t) => {
  const signal = new AbortController().signal;
  const { t: tracker } = newTracker({ clusterCIDRs: ['10.244.0.0/16'], serviceCIDRs: ['10.96.0.0/12'] });
  const nft = new RefusingNft({ family: 'ip', table: TABLE });
  const proxier = new NftablesProxier({ nft, logger: memoryLogger() });
  tracker.onService(undefined, svc('a', { clusterIP: '10.96.0.1' }));
  tracker.onEndpointSlice(slice('a-1', 'a', [ep('10.244.0.2')]), false);
  tracker.onService(undefined, svc('b', { clusterIP: '10.96.0.2' }));
  tracker.onEndpointSlice(slice('b-1', 'b', [ep('10.244.0.3'), ep('10.244.0.4')]), false);
  let c = tracker.checkout();
  await proxier.sync(c.desired, c.change, signal);
  const before = chainsOf(nft, 'pick-internal-2');
  t.is(before, 1);

  tracker.onService(svc('b', { clusterIP: '10.96.0.2' }), undefined);
  nft.refuse = true;
  tracker.requestFullSync();
  c = tracker.checkout();
  const r = await proxier.sync(c.desired, c.change, signal);
  t.true(r.cleanupFailed, 'reported');
  t.true(
    r.errors.some((e) => e.what.includes('cleanup') && e.cause instanceof Error),
    r.errors.map(problemText).join('\n'),
  );
  t.is(chainsOf(nft, 'pick-internal-2'), before, 'the stale chains are still there');

  nft.refuse = false;
  tracker.requestFullSync();
  c = tracker.checkout();
  const again = await proxier.sync(c.desired, c.change, signal);
  t.falsy(again.cleanupFailed);
  t.is(chainsOf(nft, 'pick-internal-2'), 0, 'removed at the next full sync');
});
