import test from 'ava';
import { checkLegacyIptables } from '../../../src/daemon/legacy-iptables.ts';
import type { LegacyProbe } from '../../../src/daemon/legacy-iptables.ts';

const probe = (links: Record<string, string>, files: Record<string, string>): LegacyProbe => ({
  readlink: (p) => Promise.resolve(links[p]),
  readFile: (p) => Promise.resolve(files[p]),
});

test('a host whose iptables is the legacy one is refused, naming the fix', async (t) => {
  const f = await checkLegacyIptables(
    probe(
      {
        '/etc/alternatives/iptables': '/usr/sbin/iptables-legacy',
        '/etc/alternatives/ip6tables': '/usr/sbin/ip6tables-nft',
      },
      {},
    ),
  );
  t.is(f.length, 1);
  t.true(f[0]!.fatal);
  t.regex(f[0]!.message, /\/etc\/alternatives\/iptables points to \/usr\/sbin\/iptables-legacy/);
  t.regex(f[0]!.message, /update-alternatives --set iptables \/usr\/sbin\/iptables-nft/);
  t.regex(f[0]!.message, /--proxy-mode=nftables/);
});

test('legacy tables loaded: a warning naming them; an nft host without them: nothing', async (t) => {
  const f = await checkLegacyIptables(
    probe(
      { '/etc/alternatives/iptables': '/usr/sbin/iptables-nft' },
      { '/proc/net/ip_tables_names': 'nat\nfilter\n', '/proc/net/ip6_tables_names': '' },
    ),
  );
  t.deepEqual(
    f.map((x) => x.fatal),
    [false],
  );
  t.regex(f[0]!.message, /ip_tables_names lists legacy tables \(nat, filter\)/);
  t.deepEqual(await checkLegacyIptables(probe({ '/etc/alternatives/iptables': '/usr/sbin/iptables-nft' }, {})), []);
  t.deepEqual(await checkLegacyIptables(probe({}, {})), [], 'no alternatives at all (not Debian): nothing to say');
});
