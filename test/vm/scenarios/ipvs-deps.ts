// What an IpvsProxier needs on the VM, opened for a scenario that drives the proxier directly:
// generic netlink for IPVS, ipset and rtnetlink clients, sysctls written through /proc/sys.
import { writeFileSync } from 'node:fs';
import { systemClock } from '../../../src/base/clock.ts';
import { nullLogger } from '../../../src/base/logger.ts';
import { connect, Protocol } from '../../../src/netlink/core/index.ts';
import { openIpset } from '../../../src/netlink/ipset/index.ts';
import { IpvsClient } from '../../../src/netlink/ipvs/index.ts';
import { openRoute } from '../../../src/netlink/route/index.ts';
import type { IpvsProxierDeps } from '../../../src/proxier/ipvs/index.ts';
import type { SysctlWriter } from '../../../src/proxier/types.ts';

export const procSysctl: SysctlWriter = {
  set(path, value) {
    writeFileSync(`/proc/sys/${path}`, `${value}\n`);
    return Promise.resolve();
  },
};

/** The proxier's dependencies over fresh sockets, and the function that closes them. */
export function openIpvsDeps(): { deps: IpvsProxierDeps; close: () => void } {
  const genl = connect(Protocol.GENERIC, { timeoutMs: 10_000 });
  const ipset = openIpset({ timeoutMs: 10_000 });
  const route = openRoute({ timeoutMs: 10_000 });
  return {
    deps: {
      ipvs: new IpvsClient(genl),
      ipset: ipset.client,
      route: route.client,
      sysctl: procSysctl,
      clock: systemClock,
      logger: nullLogger,
    },
    close: () => {
      genl.close();
      ipset.close();
      route.close();
    },
  };
}
