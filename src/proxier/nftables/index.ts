export { NftablesProxier } from './proxier.ts';
export type { NftablesProxierOptions } from './proxier.ts';
export { TABLE } from './names.ts';
