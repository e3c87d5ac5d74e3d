// NftClient.runMessages with echo: the kernel's echo of each new rule (NLM_F_ECHO) is matched
// to its message by seq, and its handle returned; getChain asks for one chain (not a dump).
import test from 'ava';
import { NetlinkConnection, NLM_F_ECHO, nfnlCmd } from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply } from '../../../../src/netlink/core/fake/index.ts';
import { NftClient, NftMsg } from '../../../../src/netlink/nftables/index.ts';

/** The request's payload with NFTA_RULE_HANDLE (3, be64) appended: what the kernel echoes. */
function echoOf(req: InMessage, handle: number) {
  const attr = Buffer.alloc(12);
  attr.writeUInt16LE(12, 0);
  attr.writeUInt16LE(3, 2);
  attr.writeBigUInt64BE(BigInt(handle), 4);
  return { type: req.type, seq: req.seq, payload: Buffer.concat([Buffer.from(req.payload), attr]) };
}

test('runMessages({ echo }) asks for the echo of new rules only and maps each handle to its message', async (t) => {
  const flags: number[] = [];
  let next = 100;
  const kernel = new FakeKernel((reqs) => {
    const out = [];
    for (const r of reqs) {
      if (nfnlCmd(r.type) === NftMsg.NEWRULE) {
        flags.push(r.flags);
        out.push(echoOf(r, next++));
      }
    }
    for (const r of reqs) if (r.flags & 4) out.push(ackReply(r));
    return out;
  });
  const conn = new NetlinkConnection(kernel, { timeoutMs: 2000 });
  const client = new NftClient({ family: 'ip', table: 'nat', transport: conn });
  const tx = client.newTransaction();
  tx.add({ kind: 'chain', name: 'KUBE-SERVICES' });
  tx.add({ kind: 'rule', chain: 'KUBE-SERVICES', exprs: [{ type: 'counter' }] });
  tx.delete({ kind: 'rule', chain: 'KUBE-SERVICES', exprs: [], handle: 7n });
  tx.insert({ kind: 'rule', chain: 'KUBE-SERVICES', exprs: [{ type: 'counter' }], position: 9n });
  const handles = await client.runMessages(client.encode(tx), undefined, { echo: true });
  t.deepEqual(
    [...handles],
    [
      [1, 100n],
      [3, 101n],
    ],
  );
  t.true(flags.every((f) => (f & NLM_F_ECHO) !== 0));
  // Without echo: nothing asked, nothing returned.
  flags.length = 0;
  t.is((await client.runMessages(client.encode(tx))).size, 0);
  t.true(flags.every((f) => (f & NLM_F_ECHO) === 0));
  conn.close();
});
