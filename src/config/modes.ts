// The proxy modes as users read about them: which exist, which a blank `mode` gets, which the
// packaged config names. Every text that lists the modes (--help, the man page, README,
// docs/, deploy/, the packages' descriptions) carries modeList() word for word;
// test/unit/docs/modes.test.ts holds them to it, so adding or renaming a mode here fails
// that test until each text says so.

import { DEFAULT_MODE } from './resolve.ts';
import { PROXY_MODES, type ProxyMode } from '../proxier/types.ts';

export { DEFAULT_MODE, PROXY_MODES };

/** The mode the packaged config file and the DaemonSet's ConfigMap set (kernel 5.13 or later). */
export const RECOMMENDED_MODE: ProxyMode = 'nftables';

/** The modes in the order texts list them: the default, the recommended one, then the rest. */
export const MODES_IN_TEXT_ORDER: readonly ProxyMode[] = [...new Set([DEFAULT_MODE, RECOMMENDED_MODE, ...PROXY_MODES])];

/** "iptables (default), nftables (recommended), ipvs and userspace": the phrase every text carries. */
export function modeList(): string {
  const named = MODES_IN_TEXT_ORDER.map((m) => {
    const notes = [m === DEFAULT_MODE ? 'default' : '', m === RECOMMENDED_MODE ? 'recommended' : ''].filter(Boolean);
    return notes.length > 0 ? `${m} (${notes.join(', ')})` : m;
  });
  return `${named.slice(0, -1).join(', ')} and ${named.at(-1)!}`;
}
