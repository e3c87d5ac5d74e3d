// The FakeNft contract against the kernel: the same steps, the same outcomes, the same state.
import test from 'ava';
import { FakeNft } from '../../src/netlink/nftables/fake/index.ts';
import { runContract } from '../helpers/nft-contract.ts';
import { EXPECTED } from '../helpers/nft-contract-expected.ts';
import { netnsFor } from '../helpers/netns.ts';

const S = new URL('./scenarios/nftables.ts', import.meta.url).href;

test('the kernel and FakeNft agree on every contract step', async (t) => {
  const ns = await netnsFor(t, 'nft-contract');
  const agent = await ns.agent();
  const kernel = await agent.call<Awaited<ReturnType<typeof runContract>>>(S, 'contract', 'kpts');
  const fake = await runContract(new FakeNft({ family: 'ip', table: 'kpts' }));
  t.deepEqual(
    kernel.map((s) => [s.step, s.outcome]),
    EXPECTED,
  );
  kernel.forEach((k, i) => t.deepEqual(fake[i]!.state, k.state, `state after "${k.step}"`));
});
