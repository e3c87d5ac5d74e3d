// Runs in a netns agent (the node namespace): listens to the kernel's nf_tables announcements
// (NFNLGRP_NFTABLES, as `nft monitor` does) and counts the NEWGEN messages of one process's
// commits (NFTA_GEN_PROC_PID). Armed with a count, it SIGKILLs that process from the
// announcement handler the moment that many of its transactions have committed: between two
// batches of a multi-batch sync, whatever the process does next.
import {
  AttrSet,
  listenMulticast,
  nfnlCmd,
  nfnlSubsys,
  NfnlSubsys,
  Protocol,
  splitNfPayload,
} from '../../../src/netlink/core/index.ts';
import type { MulticastListener } from '../../../src/netlink/core/index.ts';
import { NFNLGRP_NFTABLES, NftMsg } from '../../../src/netlink/nftables/index.ts';

/** linux/netfilter/nf_tables.h enum nft_gen_attributes. */
const NFTA_GEN_PROC_PID = 2;

export interface GenWatch {
  /** Generations committed by the watched process. */
  gens: number;
  /** Milliseconds since arming of each of them. */
  at: number[];
  /** The count at which the process was killed (undefined: not killed). */
  killedAfter: number | undefined;
  /** Announcements were lost (ENOBUFS) at least once. */
  overflow: boolean;
  errors: string[];
}

let listener: MulticastListener | undefined;
let watch: GenWatch | undefined;

/**
 * Starts counting the commits of `pid`; at `killAfter` of them (0: never) it is SIGKILLed.
 * A large receive buffer: a 50,000-Service sync announces hundreds of thousands of objects.
 */
export function arm(pid: number, killAfter: number): void {
  listener?.close();
  const w: GenWatch = { gens: 0, at: [], killedAfter: undefined, overflow: false, errors: [] };
  watch = w;
  const t0 = performance.now();
  listener = listenMulticast(
    Protocol.NETFILTER,
    [NFNLGRP_NFTABLES],
    {
      onMessage(m) {
        if (nfnlSubsys(m.type) !== NfnlSubsys.NFTABLES || nfnlCmd(m.type) !== NftMsg.NEWGEN) return;
        const nf = splitNfPayload(m.payload);
        if (!nf || new AttrSet(nf.attrs, 'NEWGEN').u32(NFTA_GEN_PROC_PID, 'net') !== pid) return;
        w.gens++;
        w.at.push(Math.round(performance.now() - t0));
        if (w.gens === killAfter && w.killedAfter === undefined) {
          process.kill(pid, 'SIGKILL');
          w.killedAfter = w.gens;
        }
      },
      onOverflow: () => (w.overflow = true),
      onError: (e) => w.errors.push(e.message),
    },
    { recvBufferBytes: 256 << 20, forceBuffers: true },
  );
}

/** What was seen since arm(). */
export function seen(): GenWatch {
  if (!watch) throw new Error('kill-at-gen: arm() was not called');
  return watch;
}

export function disarm(): GenWatch {
  listener?.close();
  listener = undefined;
  return seen();
}
