// A small in-memory IPVS "kernel" behind FakeKernel: the nlctrl family look-up, services,
// destinations and time-outs, with the errnos the real ip_vs_ctl.c returns. Its replies are
// written with the entry encoders, whose output is checked against real captures elsewhere.
// As the kernel's netlink_rcv_skb, it handles every request of a datagram in turn, answers
// each failure with an error, and a success with an ACK only when the request asked for one
// (pipelined requests ask on the last message only).
import {
  AttrSet,
  AttrWriter,
  ByteWriter,
  CTRL_ATTR_FAMILY_ID,
  CTRL_ATTR_FAMILY_NAME,
  GENL_ID_CTRL,
  NLM_F_ACK,
  NLM_F_DUMP,
  NLM_F_MULTI,
} from '../../../../src/netlink/core/index.ts';
import { FakeKernel } from '../../../../src/netlink/core/fake/index.ts';
import type { InMessage } from '../../../../src/netlink/core/index.ts';
import { ackReply as ack, doneReply, errorReply } from '../../../../src/netlink/core/fake/index.ts';
import type { FakeReply } from '../../../../src/netlink/core/fake/index.ts';
import {
  decodeDestination,
  decodeService,
  IpvsCmd,
  IpvsCmdAttr,
  serviceLabel,
  writeDestinationEntry,
  writeServiceEntry,
  zeroStats,
} from '../../../../src/netlink/ipvs/index.ts';
import type { IpvsDestination, IpvsService } from '../../../../src/netlink/ipvs/index.ts';

const E = { ENOENT: 2, ESRCH: 3, EEXIST: 17, EINVAL: 22 };

export class FakeIpvs {
  readonly kernel: FakeKernel;
  readonly familyId: number;
  available = true;
  schedulers = new Set(['rr', 'wrr', 'lc', 'sh']);
  readonly services = new Map<string, { svc: IpvsService; dests: Map<string, IpvsDestination> }>();
  timeouts = { tcp: 900, tcpFin: 120, udp: 300 };
  readonly requests: InMessage[] = [];
  /** Requests per datagram received, in order (pipelining shows as counts above 1). */
  readonly datagrams: number[] = [];
  /** Called before each request is handled: return an errno to refuse it (fault injection). */
  refuse: ((req: InMessage, cmd: number) => number | undefined) | undefined;

  constructor(familyId = 0x20) {
    this.familyId = familyId;
    this.kernel = new FakeKernel((reqs) => {
      this.datagrams.push(reqs.length);
      return reqs.flatMap((r) => this.handle(r));
    });
  }

  private reply(cmd: number, fill: (w: AttrWriter) => void, flags = 0): FakeReply {
    const out = new ByteWriter();
    out.u8(cmd).u8(1).u16le(0);
    fill(new AttrWriter(out));
    return { type: this.familyId, flags, payload: out.toBytes() };
  }

  private handle(req: InMessage): FakeReply[] {
    this.requests.push(req);
    const refused = this.refuse?.(req, req.payload[0] ?? -1);
    if (refused !== undefined) return [errorReply(req, refused)];
    return this.answer(req).filter((r) => r !== undefined);
  }

  private answer(req: InMessage): (FakeReply | undefined)[] {
    const ackReply = (r: InMessage): FakeReply | undefined => (r.flags & NLM_F_ACK ? ack(r) : undefined);
    if (req.type === GENL_ID_CTRL) {
      const name = new AttrSet(req.payload.subarray(4), 'ctrl').str(CTRL_ATTR_FAMILY_NAME);
      if (name !== 'IPVS' || !this.available) return [errorReply(req, E.ENOENT)];
      const out = new ByteWriter();
      out.u8(1).u8(2).u16le(0);
      new AttrWriter(out).str(CTRL_ATTR_FAMILY_NAME, 'IPVS').u16(CTRL_ATTR_FAMILY_ID, this.familyId);
      return [{ type: GENL_ID_CTRL, payload: out.toBytes() }, ackReply(req)];
    }
    if (req.type !== this.familyId) return [errorReply(req, E.EINVAL)];
    const cmd = req.payload[0]!;
    const attrs = new AttrSet(req.payload.subarray(4), 'fake ipvs', 4);
    const svcNest = attrs.nested(IpvsCmdAttr.SERVICE);
    const destNest = attrs.nested(IpvsCmdAttr.DEST);
    const key = svcNest ? serviceLabel(decodeService(svcNest)) : '';
    const entry = this.services.get(key);
    const dump = (req.flags & NLM_F_DUMP) === NLM_F_DUMP;
    switch (cmd) {
      case IpvsCmd.NEW_SERVICE: {
        const s = decodeService(svcNest!);
        if (entry) return [errorReply(req, E.EEXIST)];
        if (!this.schedulers.has(s.scheduler)) return [errorReply(req, E.ENOENT)];
        this.services.set(key, { svc: { ...s, stats: zeroStats(), unknown: [] }, dests: new Map() });
        return [ackReply(req)];
      }
      case IpvsCmd.SET_SERVICE:
        if (!entry) return [errorReply(req, E.ESRCH)];
        entry.svc = { ...decodeService(svcNest!), stats: entry.svc.stats, unknown: [] };
        return [ackReply(req)];
      case IpvsCmd.DEL_SERVICE:
        if (!entry) return [errorReply(req, E.ESRCH)];
        this.services.delete(key);
        return [ackReply(req)];
      case IpvsCmd.GET_SERVICE:
        if (dump)
          return [
            ...[...this.services.values()].map((e) =>
              this.reply(IpvsCmd.NEW_SERVICE, (w) => writeServiceEntry(w, IpvsCmdAttr.SERVICE, e.svc), NLM_F_MULTI),
            ),
            doneReply(req),
          ];
        if (!entry) return [errorReply(req, E.ESRCH)];
        return [
          this.reply(IpvsCmd.NEW_SERVICE, (w) => writeServiceEntry(w, IpvsCmdAttr.SERVICE, entry.svc)),
          ackReply(req),
        ];
      case IpvsCmd.NEW_DEST:
      case IpvsCmd.SET_DEST:
      case IpvsCmd.DEL_DEST: {
        if (!entry) return [errorReply(req, E.ESRCH)];
        const d = decodeDestination(destNest!, entry.svc.family);
        const dk = `${d.address}:${d.port}`;
        if (cmd === IpvsCmd.NEW_DEST && entry.dests.has(dk)) return [errorReply(req, E.EEXIST)];
        if (cmd !== IpvsCmd.NEW_DEST && !entry.dests.has(dk)) return [errorReply(req, E.ENOENT)];
        if (cmd === IpvsCmd.DEL_DEST) entry.dests.delete(dk);
        else
          entry.dests.set(dk, {
            ...d,
            activeConns: 0,
            inactiveConns: 0,
            persistentConns: 0,
            stats: zeroStats(),
            unknown: [],
          });
        return [ackReply(req)];
      }
      case IpvsCmd.GET_DEST:
        if (!entry) return [errorReply(req, E.ESRCH)];
        return [
          ...[...entry.dests.values()].map((d) =>
            this.reply(IpvsCmd.NEW_DEST, (w) => writeDestinationEntry(w, IpvsCmdAttr.DEST, d), NLM_F_MULTI),
          ),
          doneReply(req),
        ];
      case IpvsCmd.SET_CONFIG:
        this.timeouts = {
          tcp: attrs.u32(IpvsCmdAttr.TIMEOUT_TCP) || this.timeouts.tcp,
          tcpFin: attrs.u32(IpvsCmdAttr.TIMEOUT_TCP_FIN) || this.timeouts.tcpFin,
          udp: attrs.u32(IpvsCmdAttr.TIMEOUT_UDP) || this.timeouts.udp,
        };
        return [ackReply(req)];
      case IpvsCmd.GET_CONFIG:
        return [
          this.reply(IpvsCmd.SET_CONFIG, (w) =>
            w
              .u32(IpvsCmdAttr.TIMEOUT_TCP, this.timeouts.tcp)
              .u32(IpvsCmdAttr.TIMEOUT_TCP_FIN, this.timeouts.tcpFin)
              .u32(IpvsCmdAttr.TIMEOUT_UDP, this.timeouts.udp),
          ),
          ackReply(req),
        ];
      case IpvsCmd.FLUSH:
        this.services.clear();
        return [ackReply(req)];
      default:
        return [errorReply(req, E.EINVAL)];
    }
  }
}
