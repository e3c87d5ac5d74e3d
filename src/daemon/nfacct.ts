// iptables mode's nfacct objects (upstream's nfacct runner in NewDualStackProxier): made at
// start, before the first sync writes the rules that count in them, and read at scrape time.
// Where the kernel lacks nfnetlink_acct (or refuses), upstream's fallback: no counting rules,
// no metric, one log line. --cleanup deletes exactly these objects (cleanup.ts).

import type { Logger } from '../base/logger.ts';
import { isBusy, isNotFound, NetlinkError } from '../netlink/core/index.ts';
import type { NfacctClient } from '../netlink/nfacct/index.ts';
import type { NfacctReader } from '../metrics/index.ts';
import { NfacctCounter } from '../proxier/iptables/index.ts';

/** Ours, by name: upstream's two objects. */
export const OUR_NFACCT_OBJECTS: readonly string[] = Object.values(NfacctCounter);

/**
 * Makes each object unless it exists (a restart keeps counting) and adds the ones that exist
 * to `names`, which the proxiers read at each sync. One warning names what failed.
 */
export async function ensureNfacctObjects(
  client: NfacctClient,
  names: Set<string>,
  logger: Logger,
  signal?: AbortSignal,
): Promise<void> {
  const failed: string[] = [];
  let cause: unknown;
  for (const name of OUR_NFACCT_OBJECTS) {
    try {
      await client.ensure(name, signal ? { signal } : {});
      names.add(name);
    } catch (err) {
      failed.push(name);
      cause ??= err;
    }
  }
  if (failed.length > 0)
    logger.warn(
      'Cannot create nfacct counters (is nfnetlink_acct in the kernel?); their iptables rules and metrics are left out',
      { counters: failed.join(','), err: cause },
    );
}

/** The metrics' view of the objects: packet counts read from the kernel at each scrape. */
export function nfacctReader(client: NfacctClient, names: ReadonlySet<string>): NfacctReader {
  return { names, read: async (name) => (await client.get(name)).packets };
}

/**
 * --cleanup: deletes our objects only, by name. A missing one is fine; one still used by a
 * rule (EBUSY: another program's, or ours not yet removed) is kept and reported.
 */
export async function removeNfacctObjects(client: NfacctClient): Promise<{ removed: string[]; kept: string[] }> {
  const removed: string[] = [];
  const kept: string[] = [];
  for (const name of OUR_NFACCT_OBJECTS) {
    try {
      await client.del(name);
      removed.push(name);
    } catch (err) {
      if (isNotFound(err)) continue;
      // A kernel without nfnetlink_acct refuses the subsystem: there can be no objects.
      if (err instanceof NetlinkError && (err.code === 'EINVAL' || err.code === 'EOPNOTSUPP')) break;
      if (isBusy(err)) kept.push(name);
      else throw err;
    }
  }
  return { removed, kept };
}
