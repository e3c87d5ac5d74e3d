// nf_tables over nfnetlink: typed objects, expressions, transactions and a kernel client (the
// in-memory fake for tests is fake/index.ts, exported from there only). See client.ts for the
// entry point and rule-builder.ts for writing rules.
export * from './constants.ts';
export * from './types.ts';
export * from './datatypes.ts';
export * from './verdict.ts';
export * from './expr/index.ts';
export { RuleBuilder, rule } from './rule-builder.ts';
export type { Field, RejectWith } from './rule-builder.ts';
export { NftTransaction, NftValidationError, renderOp } from './transaction.ts';
export type { Operation, Verb, SetSchema } from './transaction.ts';
export { NftClient } from './client.ts';
export type { ElementPagesOptions, NftClientOptions, NftInterface, RunStats } from './client.ts';
export { decodeTable } from './table.ts';
export type { ListedTable } from './table.ts';
export { decodeChain } from './chain.ts';
export type { ListedChain } from './chain.ts';
export { decodeSet, setUserdata, renderSetType } from './set.ts';
export type { ListedSet } from './set.ts';
export { decodeRawElements, toElements, renderElement, mergeIntervals } from './element.ts';
export { encodeElement, MAX_ELEMENTS_BYTES } from './element-encode.ts';
export type { RawElement } from './element.ts';
export { decodeRule, renderRuleBody } from './rule.ts';
export type { ListedRule } from './rule.ts';
export * from './udata.ts';
export { decodeNftChange, monitorNftables, NFNLGRP_NFTABLES } from './monitor.ts';
export type { NftChange, NftChangeKind, NftMonitorHandlers } from './monitor.ts';
