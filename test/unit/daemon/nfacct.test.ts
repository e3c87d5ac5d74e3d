// The iptables mode's nfacct objects over the fake kernel: made at start (existing ones kept),
// upstream's fallback with one warning where the kernel refuses, and --cleanup's delete of
// ours only, by name (missing ones fine, busy ones kept and reported).
import test from 'ava';
import { NetlinkConnection, errnoNumber } from '../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../src/netlink/core/fake/index.ts';
import type { InMessage } from '../../../src/netlink/core/index.ts';
import { ackReply, errorReply } from '../../../src/netlink/core/fake/index.ts';
import { NfacctClient, NfacctCmd, NfacctAttr } from '../../../src/netlink/nfacct/index.ts';
import { AttrSet } from '../../../src/netlink/core/index.ts';
import { ensureNfacctObjects, OUR_NFACCT_OBJECTS, removeNfacctObjects } from '../../../src/daemon/nfacct.ts';
import { captureLog } from '../../helpers/log-capture.ts';

const nameOf = (m: InMessage): string => new AttrSet(m.payload.subarray(4), 'req').str(NfacctAttr.NAME) ?? '';

function kernel(answer: (cmd: number, name: string) => string | undefined) {
  const seen: string[] = [];
  const client = new NfacctClient(
    new NetlinkConnection(
      new FakeKernel(([req]) => {
        const cmd = req!.type & 0xff;
        seen.push(`${cmd}:${nameOf(req!)}`);
        const errno = answer(cmd, nameOf(req!));
        return [errno ? errorReply(req!, errnoNumber(errno)) : ackReply(req!)];
      }),
    ),
  );
  return { client, seen };
}

test('start: both objects made, an existing one (EBUSY) kept as it is', async (t) => {
  const { client, seen } = kernel((_cmd, name) => (name === 'localhost_nps_accepted_pkts' ? 'EBUSY' : undefined));
  const names = new Set<string>();
  const log = captureLog({});
  await ensureNfacctObjects(client, names, log.logger);
  t.deepEqual([...names], [...OUR_NFACCT_OBJECTS]);
  t.deepEqual(
    seen,
    OUR_NFACCT_OBJECTS.map((n) => `${NfacctCmd.NEW}:${n}`),
  );
  t.deepEqual(await log.lines(), []);
});

test('start on a kernel without nfacct: no objects, so no counting rules or metrics, and one warning', async (t) => {
  const { client } = kernel(() => 'EINVAL');
  const names = new Set<string>();
  const log = captureLog({});
  await ensureNfacctObjects(client, names, log.logger);
  t.is(names.size, 0);
  const lines = await log.lines();
  t.is(lines.length, 1, lines.join('\n'));
  t.regex(lines[0]!, /Cannot create nfacct counters.*ct_state_invalid_dropped_pkts,localhost_nps_accepted_pkts/);
});

test('--cleanup deletes ours by name: missing ones skipped, busy ones kept, no nfacct in the kernel is no error', async (t) => {
  const busy = kernel((_c, name) => (name === 'ct_state_invalid_dropped_pkts' ? 'ENOENT' : 'EBUSY'));
  t.deepEqual(await removeNfacctObjects(busy.client), { removed: [], kept: ['localhost_nps_accepted_pkts'] });
  t.deepEqual(
    busy.seen,
    OUR_NFACCT_OBJECTS.map((n) => `${NfacctCmd.DEL}:${n}`),
  );
  const ok = kernel(() => undefined);
  t.deepEqual(await removeNfacctObjects(ok.client), { removed: [...OUR_NFACCT_OBJECTS], kept: [] });
  const none = kernel(() => 'EINVAL');
  t.deepEqual(await removeNfacctObjects(none.client), { removed: [], kept: [] });
  const denied = kernel(() => 'EPERM');
  await t.throwsAsync(removeNfacctObjects(denied.client), { message: /del nfacct ct_state_invalid_dropped_pkts/ });
});
