// iptables mode writes the nf_tables form of iptables (what iptables-nft shows). The kernel's
// legacy x_tables (ip_tables, ip6_tables) cannot be written over netlink, and a host whose
// tools and other software use them would end up with two rulesets that both see packets.
// Node has no getsockopt(IPT_SO_GET_INFO), so the checks use what the filesystem shows:
//   - /etc/alternatives/iptables (Debian's update-alternatives) pointing at iptables-legacy:
//     the host's iptables, and so kubelet, Docker and admins, write legacy tables;
//   - /proc/net/ip_tables_names or ip6_tables_names listing tables: a legacy table is loaded
//     (iptables-legacy was run, or a module that registers one). Only a problem together with
//     rules there, which we cannot see; named as a warning, not a refusal.

import { readFile, readlink } from 'node:fs/promises';

export interface LegacyFinding {
  /** Refuse to start. */
  readonly fatal: boolean;
  readonly message: string;
}

export interface LegacyProbe {
  readlink(path: string): Promise<string | undefined>;
  readFile(path: string): Promise<string | undefined>;
}

const fsProbe: LegacyProbe = {
  readlink: (p) => readlink(p).catch(() => undefined),
  readFile: (p) => readFile(p, 'utf8').catch(() => undefined),
};

const FIX =
  'iptables mode writes iptables-nft (nf_tables) rules. Switch the host to iptables-nft ' +
  '(`update-alternatives --set iptables /usr/sbin/iptables-nft` and `update-alternatives --set ip6tables /usr/sbin/ip6tables-nft`), ' +
  'remove what upstream kube-proxy left in the legacy tables (`iptables-legacy-save | grep KUBE-`; `kube-proxy --cleanup` of the old version, ' +
  'or reboot), restart what writes iptables rules (kubelet, the container runtime), then start kube-proxy-ts again; ' +
  'or use --proxy-mode=nftables, which does not share the iptables tables';

export async function checkLegacyIptables(probe: LegacyProbe = fsProbe): Promise<LegacyFinding[]> {
  const out: LegacyFinding[] = [];
  for (const tool of ['iptables', 'ip6tables']) {
    const target = await probe.readlink(`/etc/alternatives/${tool}`);
    if (target !== undefined && /legacy/.test(target)) {
      out.push({
        fatal: true,
        message: `/etc/alternatives/${tool} points to ${target}: this host's ${tool} writes the legacy tables. ${FIX}`,
      });
    }
  }
  for (const file of ['/proc/net/ip_tables_names', '/proc/net/ip6_tables_names']) {
    const text = await probe.readFile(file);
    const names = (text ?? '')
      .split('\n')
      .map((s) => s.trim())
      .filter((s) => s !== '');
    if (names.length > 0) {
      out.push({
        fatal: false,
        message: `${file} lists legacy tables (${names.join(', ')}): rules there also see packets and are invisible to iptables-nft; check \`iptables-legacy-save\` for KUBE- chains`,
      });
    }
  }
  return out;
}
