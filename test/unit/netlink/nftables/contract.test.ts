// FakeNft runs the shared contract; test/kernel/nftables-contract.test.ts runs the same
// steps against the kernel and compares with the outcomes recorded here.
import test from 'ava';
import { FakeNft } from '../../../../src/netlink/nftables/fake/index.ts';
import { runContract } from '../../../helpers/nft-contract.ts';
import { EXPECTED } from '../../../helpers/nft-contract-expected.ts';

test('FakeNft honours the contract the kernel honours', async (t) => {
  const got = await runContract(new FakeNft({ family: 'ip', table: 'kpts' }));
  t.deepEqual(
    got.map((s) => [s.step, s.outcome]),
    EXPECTED,
  );
});
