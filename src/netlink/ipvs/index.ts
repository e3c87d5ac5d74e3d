// The IPVS generic-netlink layer: services, destinations, time-outs. See client.ts.
export * from './constants.ts';
export * from './types.ts';
export { serviceLabel, decodeService, writeServiceEntry, writeServiceKey, writeServiceSpec } from './service.ts';
export {
  destinationLabel,
  decodeDestination,
  writeDestinationEntry,
  writeDestinationKey,
  writeDestinationSpec,
} from './destination.ts';
export { zeroStats } from './stats.ts';
export * from './messages.ts';
export {
  IPVS_OPS_PER_DATAGRAM,
  IpvsClient,
  IpvsSchedulerError,
  isDestinationNotFound,
  isIpvsExists,
  isSchedulerMissing,
  isServiceNotFound,
} from './client.ts';
export type { ApplyManyOptions, IpvsCallOptions, IpvsTransport } from './client.ts';
export { opLabel, opMessage } from './ops.ts';
export type { IpvsOp } from './ops.ts';
