// The iptables mode's rule generator (the writer and proxier build on it).
export type * from './types.ts';
export { servicePortRules } from './rules.ts';
export { globalRules, JUMPS, JUMP_SPECS, FIXED_CHAINS } from './global.ts';
export { assembleRuleset } from './assemble.ts';
export { globalContext, portContext, endpointCount, LARGE_CLUSTER_ENDPOINTS, type IptablesOptions } from './context.ts';
export {
  Chain,
  NfacctCounter,
  PORT_CHAIN_PREFIXES,
  isServicePortChain,
  portChainNames,
  endpointChainName,
  servicePortName,
  hash16,
  type PortChainNames,
} from './names.ts';
export { probability } from './probability.ts';
export { ifLocal, ifNotLocal } from './detect-local.ts';
// The proxier and its writer.
export { IptablesProxier, IPTABLES_RECV_BYTES, isOurs, ROUTE_LOCALNET } from './proxier.ts';
export type { IptablesProxierOptions } from './proxier.ts';
export { iptablesNftCodec } from '../iptables-nft/codec.ts';
export { removeAll as removeIptablesObjects } from '../iptables-nft/remove.ts';
export { writerBudgets } from '../iptables-nft/writer.ts';
