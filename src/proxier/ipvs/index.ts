// The IPVS proxy mode: see proxier.ts.
export { IpvsProxier, IpvsSyncError } from './proxier.ts';
export type { IpvsProxierDeps, IpvsProxierOptions } from './proxier.ts';
export { RecordingSysctl, ipvsSysctls } from './sysctl.ts';
export { DUMMY_DEVICE, KNOWN_SCHEDULERS, SETS, SetName, ipsetName } from './names.ts';
export type { SetKey, SetInfo } from './names.ts';
export { planPort, destinationsFor, vsKey, destKey } from './plan.ts';
export type { PortPlan, PlanContext, VsPlan, EntryPlan, NoNodeAccess } from './plan.ts';
export { companionRules, ruleArgs, toIptablesSave, CHAINS, JUMPS, Chain } from './rules.ts';
export type { CompanionRules, IptRule, IptTable, JumpRule, Match, RulesInput, SetDir, Target } from './rules.ts';
export { CompanionWriter } from './companion.ts';
export type { CompanionDeps, CompanionSink } from './companion.ts';
