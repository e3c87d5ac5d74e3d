// IPVS writes as data, for IpvsClient.applyMany(): many operations in few round trips.
//
// IPVS has no transactions, but the kernel's generic-netlink receive path (netlink_rcv_skb)
// handles every message of a datagram in turn, each on its own: a failure is answered with an
// error naming that message's seq and the next message is handled regardless. So a list of
// operations sent back to back is applied in list order, exactly as one call after another
// would be, only without waiting for each answer: a service added earlier in the list exists
// when a later operation names it, and one operation that fails does not stop the rest.

import type { OutMessage } from '../core/index.ts';
import { destinationLabel } from './destination.ts';
import {
  delDestMessage,
  delServiceMessage,
  newDestMessage,
  newServiceMessage,
  setDestMessage,
  setServiceMessage,
} from './messages.ts';
import { serviceLabel } from './service.ts';
import type { IpvsDestinationKey, IpvsDestinationSpec, IpvsServiceKey, IpvsServiceSpec } from './types.ts';

export type IpvsOp =
  | { readonly op: 'add-service'; readonly service: IpvsServiceSpec }
  | { readonly op: 'edit-service'; readonly service: IpvsServiceSpec }
  | { readonly op: 'delete-service'; readonly service: IpvsServiceKey }
  | { readonly op: 'add-destination'; readonly service: IpvsServiceKey; readonly destination: IpvsDestinationSpec }
  | { readonly op: 'edit-destination'; readonly service: IpvsServiceKey; readonly destination: IpvsDestinationSpec }
  | { readonly op: 'delete-destination'; readonly service: IpvsServiceKey; readonly destination: IpvsDestinationKey };

/** The request for one operation (throws TypeError on a value the encoders refuse). */
export function opMessage(family: number, o: IpvsOp): OutMessage {
  switch (o.op) {
    case 'add-service':
      return newServiceMessage(family, o.service);
    case 'edit-service':
      return setServiceMessage(family, o.service);
    case 'delete-service':
      return delServiceMessage(family, o.service);
    case 'add-destination':
      return newDestMessage(family, o.service, o.destination);
    case 'edit-destination':
      return setDestMessage(family, o.service, o.destination);
    case 'delete-destination':
      return delDestMessage(family, o.service, o.destination);
  }
}

/** "add ipvs destination 10.0.0.1:8080 of TCP 10.96.0.1:80": for errors raised before anything was sent. */
export function opLabel(o: IpvsOp): string {
  const [verb, what] = o.op.split('-') as [string, string];
  if (o.op === 'add-service' || o.op === 'edit-service' || o.op === 'delete-service')
    return `${verb} ipvs ${what} ${serviceLabel(o.service)}`;
  return `${verb} ipvs ${what} ${destinationLabel(o.destination)} of ${serviceLabel(o.service)}`;
}
