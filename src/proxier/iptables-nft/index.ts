// The iptables-nft ruleset writer shared by every mode whose rules are iptables rules (iptables,
// userspace, IPVS's companion rules): units of chains and rules diffed against the kernel and
// sent in nfnetlink batches (writer.ts). It knows nothing of any mode's chain names: a mode hands
// it units and says which chains are its own.
export * from './units.ts';
export type * from './writer-types.ts';
export * from './codec.ts';
export * from './kernel-state.ts';
export * from './groups.ts';
export * from './state.ts';
export * from './plan-common.ts';
export * from './plan-full.ts';
export * from './plan-partial.ts';
export * from './learn-handles.ts';
export * from './remove.ts';
export * from './trust.ts';
export * from './canary.ts';
export * from './writer.ts';
export * from './plan-diff.ts';
