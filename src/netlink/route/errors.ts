// Predicates for the rtnetlink errors callers branch on.
import { NetlinkError } from '../core/index.ts';

const hasCode = (e: unknown, ...codes: string[]): boolean => e instanceof NetlinkError && codes.includes(e.code);

/** No link of that name or index (the kernel answers ENODEV). */
export const isNoSuchLink = (e: unknown): boolean => hasCode(e, 'ENODEV');
/** The link name, or the address on the link, is taken. */
export const isRouteExists = (e: unknown): boolean => hasCode(e, 'EEXIST');
/** The address to delete is not on the link. */
export const isNoSuchAddress = (e: unknown): boolean => hasCode(e, 'EADDRNOTAVAIL');
/** The kernel has no driver for the link kind (e.g. no CONFIG_DUMMY): EOPNOTSUPP. */
export const isKindUnsupported = (e: unknown): boolean => hasCode(e, 'EOPNOTSUPP', 'ENOTSUP');
