// nfacct over nfnetlink_acct: the named counters xt_nfacct rules feed (iptables mode's metrics).
export * from './constants.ts';
export { checkNfacctName, decodeCounter, delMessage, dumpMessage, getMessage, newMessage } from './object.ts';
export type { NfacctCounter } from './object.ts';
export { NfacctClient } from './client.ts';
export type { NfacctCallOptions } from './client.ts';
