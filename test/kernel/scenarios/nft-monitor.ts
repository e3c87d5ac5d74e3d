// Runs inside a test namespace (netns agent): listens to nf_tables announcements
// (src/netlink/nftables/monitor.ts) while iptables-nft adds and removes rules in nat PREROUTING,
// one jumping to a chain, one accepting; reports the rule changes announced.
import { execFileSync } from 'node:child_process';
import { monitorNftables } from '../../../src/netlink/nftables/index.ts';
import type { NftChange } from '../../../src/netlink/nftables/index.ts';

const ipt = (...a: string[]): void => void execFileSync('iptables-nft', ['-t', 'nat', ...a]);

export async function ruleChanges(): Promise<{ changes: NftChange[]; errors: string[] }> {
  const changes: NftChange[] = [];
  const errors: string[] = [];
  const listener = monitorNftables({
    onChange: (c) => {
      if (c.kind === 'rule') changes.push(c);
    },
    onOverflow: () => errors.push('overflow'),
    onError: (e) => errors.push(e.message),
  });
  try {
    ipt('-N', 'KUBE-SERVICES');
    ipt('-A', 'PREROUTING', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES');
    ipt('-A', 'PREROUTING', '-p', 'tcp', '--dport', '2222', '-j', 'ACCEPT');
    ipt('-D', 'PREROUTING', '-m', 'comment', '--comment', 'kubernetes service portals', '-j', 'KUBE-SERVICES');
    ipt('-D', 'PREROUTING', '-p', 'tcp', '--dport', '2222', '-j', 'ACCEPT');
    // Read asynchronously: wait (bounded) for the last removal.
    const end = Date.now() + 5_000;
    while (changes.filter((c) => !c.added).length < 2 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    return { changes, errors };
  } finally {
    listener.close();
  }
}
