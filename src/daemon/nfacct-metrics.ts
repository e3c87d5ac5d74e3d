// The nfacct-fed iptables metrics, registered once init() has made the objects.

import type { Logger } from '../base/logger.ts';
import { registerNfacctMetrics } from '../metrics/index.ts';
import type { NfacctReader, ProxyMetrics } from '../metrics/index.ts';

export function wireNfacctMetrics(metrics: ProxyMetrics, reader: NfacctReader, logger: Logger): void {
  // A failed read is told once, until a read of that counter works again (scrapes are frequent).
  const failing = new Set<string>();
  registerNfacctMetrics(
    metrics.registry,
    {
      names: reader.names,
      read: async (name) => {
        const v = await reader.read(name);
        failing.delete(name);
        return v;
      },
    },
    (counter, err) => {
      if (failing.has(counter)) return;
      failing.add(counter);
      logger.warn('Reading an nfacct counter failed; its metric keeps the last value', { counter, err });
    },
  );
}
