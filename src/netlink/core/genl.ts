// Generic netlink: messages start with struct genlmsghdr (cmd u8, version u8, reserved u16)
// and are addressed to a family id the kernel assigns at run time, looked up by name
// through the "nlctrl" controller (GENL_ID_CTRL) and cached here.

import { AttrSet, AttrWriter } from './attrs.ts';
import { ByteWriter } from './bytes.ts';
import {
  CTRL_ATTR_FAMILY_ID,
  CTRL_ATTR_FAMILY_NAME,
  CTRL_ATTR_HDRSIZE,
  CTRL_ATTR_MAXATTR,
  CTRL_ATTR_MCAST_GROUPS,
  CTRL_ATTR_MCAST_GRP_ID,
  CTRL_ATTR_MCAST_GRP_NAME,
  CTRL_ATTR_VERSION,
  CTRL_CMD_GETFAMILY,
  GENL_HDRLEN,
  GENL_ID_CTRL,
} from './constants.ts';
import { isNotFound, NetlinkDecodeError, NetlinkError } from './errors.ts';
import type { NetlinkTransport } from './connection.ts';
import type { InMessage, OutMessage } from './message.ts';

export function genlMessage(
  familyId: number,
  cmd: number,
  version: number,
  flags: number,
  label: string,
  fill: (w: AttrWriter) => void = () => {},
): OutMessage {
  const out = new ByteWriter(128);
  out.u8(cmd).u8(version).u16le(0);
  fill(new AttrWriter(out));
  return { type: familyId, flags, payload: out.toBytes(), label };
}

/** The genlmsghdr of a received message and its attributes. */
export function splitGenlPayload(m: InMessage, where: string): { cmd: number; version: number; attrs: AttrSet } {
  if (m.payload.length < GENL_HDRLEN)
    throw new NetlinkDecodeError(where, 0, `payload of ${m.payload.length} bytes has no genlmsghdr`);
  return {
    cmd: m.payload[0]!,
    version: m.payload[1]!,
    attrs: new AttrSet(m.payload.subarray(GENL_HDRLEN), where, GENL_HDRLEN),
  };
}

export interface GenlFamily {
  name: string;
  id: number;
  version: number;
  hdrSize: number;
  maxAttr: number;
  /** Multicast group name -> group id. */
  groups: ReadonlyMap<string, number>;
}

export function parseFamily(m: InMessage): GenlFamily {
  const { attrs } = splitGenlPayload(m, 'genl family');
  const groups = new Map<string, number>();
  const g = attrs.nested(CTRL_ATTR_MCAST_GROUPS);
  if (g) {
    for (const entry of g.all) {
      const e = new AttrSet(entry.data, 'genl mcast group', entry.offset + 4);
      const name = e.str(CTRL_ATTR_MCAST_GRP_NAME);
      const id = e.u32(CTRL_ATTR_MCAST_GRP_ID);
      if (name !== undefined && id !== undefined) groups.set(name, id);
    }
  }
  return {
    name: attrs.require(CTRL_ATTR_FAMILY_NAME, attrs.str(CTRL_ATTR_FAMILY_NAME)),
    id: attrs.require(CTRL_ATTR_FAMILY_ID, attrs.u16(CTRL_ATTR_FAMILY_ID)),
    version: attrs.u32(CTRL_ATTR_VERSION) ?? 0,
    hdrSize: attrs.u32(CTRL_ATTR_HDRSIZE) ?? 0,
    maxAttr: attrs.u32(CTRL_ATTR_MAXATTR) ?? 0,
    groups,
  };
}

/**
 * Resolves generic-netlink family names once per transport. A missing family (the module
 * is not loaded, or the kernel lacks it) is an ENOENT NetlinkError naming the family.
 */
export class GenlFamilies {
  private readonly transport: NetlinkTransport;
  private readonly cache = new Map<string, Promise<GenlFamily>>();

  constructor(transport: NetlinkTransport) {
    this.transport = transport;
  }

  resolve(name: string): Promise<GenlFamily> {
    let p = this.cache.get(name);
    if (!p) {
      p = this.lookup(name);
      this.cache.set(name, p);
      // A failed lookup is not cached: the module may be loaded later.
      p.catch(() => this.cache.delete(name));
    }
    return p;
  }

  private async lookup(name: string): Promise<GenlFamily> {
    const msg = genlMessage(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, 0, 0, `get genl family ${name}`, (w) =>
      w.str(CTRL_ATTR_FAMILY_NAME, name),
    );
    try {
      const replies = await this.transport.request(msg);
      const first = replies[0];
      if (!first) throw new NetlinkDecodeError(`genl family ${name}`, 0, 'the controller sent no reply');
      return parseFamily(first);
    } catch (err) {
      if (isNotFound(err))
        throw new NetlinkError(msg.label, (err as NetlinkError).errno, undefined, {
          cause: err,
          detail: 'not available in this kernel',
        });
      throw err;
    }
  }
}
