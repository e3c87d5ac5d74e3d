// ipset over nfnetlink: sets and entries for the IPVS proxier.
export * from './constants.ts';
export * from './types.ts';
export * from './errors.ts';
export {
  adtBulkMessages,
  adtMessage,
  createMessage,
  decodeEntry,
  decodeList,
  destroyMessage,
  entryProblem,
  flushMessage,
  formatEntry,
  getByNameMessage,
  listMessage,
  netEntry,
  parseByNameReply,
  parseEntry,
  parseTypeReply,
  protocolMessage,
  renameMessage,
  swapMessage,
  typeMessage,
} from './codec.ts';
export type { AdtCmd } from './codec.ts';
export { IpsetClient, invalidEntries } from './client.ts';
export type { IpsetAdtOptions, IpsetCallOptions, IpsetRef } from './client.ts';

import { connect, Protocol } from '../core/index.ts';
import type { ConnectionOptions, SocketOptions } from '../core/index.ts';
import { IpsetClient } from './client.ts';

/** An IpsetClient on its own netfilter socket in this process's network namespace. */
export function openIpset(opts: ConnectionOptions & SocketOptions = {}): { client: IpsetClient; close(): void } {
  const conn = connect(Protocol.NETFILTER, opts);
  return { client: new IpsetClient(conn), close: () => conn.close() };
}
