// Scenario functions for the netlink socket addon (native/netlink-socket), run inside a test
// namespace by the netns agent. rtnetlink and nf_tables numbers are written out here from the
// uapi headers rather than imported, so that the test does not depend on the code it checks.

import { readFileSync } from 'node:fs';
import { connect, NetlinkConnection, NfnlSubsys, nfMessage, openRawSocket } from '../../../src/netlink/core/index.ts';
import type { OutMessage, SocketOptions } from '../../../src/netlink/core/index.ts';
import { errorView } from './outcomes.ts';
import type { ErrorView } from './outcomes.ts';

export type { ErrorView };

const NETLINK_ROUTE = 0;
const NETLINK_NETFILTER = 12;
const RTM_GETLINK = 18;
const AF_INET = 2;
const NFT_MSG_NEWTABLE = 0;
const NFTA_TABLE_NAME = 1;
const NLM_F_CREATE = 0x400;

/** RTM_GETLINK for an interface index no namespace has: the kernel answers ENODEV. */
const getMissingLink = (ifindex: number): OutMessage => {
  const payload = new Uint8Array(16); // struct ifinfomsg
  new DataView(payload.buffer).setInt32(4, ifindex, true);
  return { type: RTM_GETLINK, flags: 0, payload, label: `get link ${ifindex}` };
};

const getLoopback = (): OutMessage => {
  const payload = new Uint8Array(16);
  new DataView(payload.buffer).setInt32(4, 1, true);
  return { type: RTM_GETLINK, flags: 0, payload, label: 'get link lo' };
};

export interface OverflowResult {
  /** The pipeline's own outcome: a rejection (ENOBUFS) or per-request results. */
  error: ErrorView | null;
  failed: number;
  codes: string[];
  /** A request on the same connection afterwards: the socket still works. */
  after: ErrorView | 'ok';
  recvBuffer: number;
}

/**
 * `count` failing requests in ONE datagram: every one queues an error reply that echoes it.
 * With the default receive buffer the kernel drops most replies (ENOBUFS); the `netlink`
 * package aborted the process there.
 */
export async function overflowErrors(count: number, opts: SocketOptions = {}): Promise<OverflowResult> {
  const conn = connect(NETLINK_ROUTE, { timeoutMs: 10_000, ...opts });
  const sock = openRawSocket(NETLINK_ROUTE, opts);
  const recvBuffer = sock.bufferSizes!().recv;
  sock.close();
  try {
    const msgs = Array.from({ length: count }, (_, i) => getMissingLink(0x7fff0000 + i));
    let error: ErrorView | null = null;
    let results: unknown[] = [];
    try {
      results = await conn.pipeline(msgs, { perDatagram: count });
    } catch (e) {
      error = errorView(e);
    }
    const codes = [...new Set(results.map((r) => (r ? errorView(r).code! : 'ok')))];
    let after: ErrorView | 'ok' = 'ok';
    try {
      await conn.request(getLoopback());
    } catch (e) {
      after = errorView(e);
    }
    return { error, failed: results.filter(Boolean).length, codes, after, recvBuffer };
  } finally {
    conn.close();
  }
}

/** Effective SO_SNDBUF/SO_RCVBUF after asking for `bytes`, with and without the FORCE options. */
export function bufferSizes(bytes: number): {
  plain: { send: number; recv: number };
  forced: { send: number; recv: number };
  wmemMax: number;
  rmemMax: number;
  maxSendBytes: number;
} {
  const plainSock = openRawSocket(NETLINK_NETFILTER, { sendBufferBytes: bytes, recvBufferBytes: bytes });
  const forcedSock = openRawSocket(NETLINK_NETFILTER, {
    sendBufferBytes: bytes,
    recvBufferBytes: bytes,
    forceBuffers: true,
  });
  try {
    return {
      plain: plainSock.bufferSizes!(),
      forced: forcedSock.bufferSizes!(),
      wmemMax: Number(readFileSync('/proc/sys/net/core/wmem_max', 'utf8')),
      rmemMax: Number(readFileSync('/proc/sys/net/core/rmem_max', 'utf8')),
      maxSendBytes: forcedSock.maxSendBytes(),
    };
  } finally {
    plainSock.close();
    forcedSock.close();
  }
}

/** A batch larger than the capped send buffer allows, on a socket with forced buffers. */
export async function bigBatch(
  tables: number,
  sendBufferBytes: number,
  forceBuffers: boolean,
): Promise<ErrorView | null> {
  const conn = connect(NETLINK_NETFILTER, { timeoutMs: 60_000, sendBufferBytes, forceBuffers });
  try {
    const msgs = Array.from({ length: tables }, (_, i) =>
      nfMessage(NfnlSubsys.NFTABLES, NFT_MSG_NEWTABLE, AF_INET, NLM_F_CREATE, `add table ip t${i}`, (w) =>
        w.str(NFTA_TABLE_NAME, `kpts-table-with-a-long-name-${i}`),
      ),
    );
    await conn.batch(NfnlSubsys.NFTABLES, msgs);
    return null;
  } catch (e) {
    return errorView(e);
  } finally {
    conn.close();
  }
}

/** A table name longer than NFT_NAME_MAXLEN: the kernel's policy check refuses it, with text. */
export async function refusedWithExtAck(
  extAck: boolean,
): Promise<{ view: ErrorView; extack: { msg?: string; offset?: number } | undefined }> {
  const conn = connect(NETLINK_NETFILTER, { timeoutMs: 5000, extAck });
  try {
    const msg = nfMessage(NfnlSubsys.NFTABLES, NFT_MSG_NEWTABLE, AF_INET, NLM_F_CREATE, 'add table ip (long)', (w) =>
      w.str(NFTA_TABLE_NAME, 'x'.repeat(300)),
    );
    await conn.batch(NfnlSubsys.NFTABLES, [msg]);
    throw new Error('the kernel accepted a 300-byte table name');
  } catch (e) {
    const ext = (e as { extack?: { msg?: string; offset?: number } }).extack;
    return { view: errorView(e), extack: ext ? { ...ext } : undefined };
  } finally {
    conn.close();
  }
}

/** Closes the socket from inside the receive callback, with more datagrams queued behind. */
export async function closeInsideCallback(): Promise<{ seen: number; closedOk: boolean }> {
  const sock = openRawSocket(NETLINK_ROUTE, { recvMessageBytes: 4096 });
  let seen = 0;
  const done = new Promise<void>((resolve) => {
    sock.listen(
      () => {
        seen++;
        sock.close();
        sock.close();
        resolve();
      },
      () => undefined,
    );
  });
  // Three requests in three datagrams: three replies are queued before the first is read.
  for (let i = 0; i < 3; i++) {
    const out = new Uint8Array(32);
    const dv = new DataView(out.buffer);
    dv.setUint32(0, 32, true);
    dv.setUint16(4, RTM_GETLINK, true);
    dv.setUint16(6, 1, true);
    dv.setUint32(8, i + 1, true);
    dv.setInt32(20, 0x7fff0000, true);
    await sock.send([out]);
  }
  await done;
  // Let the event loop run a few turns: a poll callback after close must not call back.
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  let closedOk = false;
  try {
    await sock.send([new Uint8Array(16)]);
  } catch (e) {
    closedOk = (e as { code?: string }).code === 'EBADF';
  }
  return { seen, closedOk };
}

/** A fixed receive buffer smaller than a reply: reported as ENOBUFS, and the socket goes on. */
export async function truncatedReply(): Promise<{ first: ErrorView | 'ok'; second: ErrorView | 'ok' }> {
  // lo's RTM_NEWLINK is over a kilobyte; the ENODEV error for a missing link is under 100 bytes.
  const conn = new NetlinkConnection(openRawSocket(NETLINK_ROUTE, { recvMessageBytes: 256 }), { timeoutMs: 5000 });
  const attempt = async (msg: OutMessage): Promise<ErrorView | 'ok'> => {
    try {
      await conn.request(msg);
      return 'ok';
    } catch (e) {
      return errorView(e);
    }
  };
  try {
    return { first: await attempt(getLoopback()), second: await attempt(getMissingLink(0x7fff0000)) };
  } finally {
    conn.close();
  }
}
