// STAND-IN for src/daemon/main.ts, used by test/vm/systemd-boot.test.ts only while the real
// main is the placeholder. The test copies this file over the INSTALLED
// /usr/lib/kube-proxy-ts/src/daemon/main.ts (plain JavaScript is valid TypeScript), so the
// packaged chain runs unchanged: unit -> /usr/bin/kube-proxy-ts -> bundled node ->
// bin/kube-proxy-ts.js -> main(). It uses the real modules the daemon is built from:
// config (parses the packaged /etc/kube-proxy-ts/config.yaml), log (journald priorities),
// daemon/sd-notify (the sd-notify addon: READY, STATUS, WATCHDOG, STOPPING) and
// netlink/nftables (a real nf_tables batch under the unit's hardening). It proves what the
// packaging provides, not what the daemon does: it never syncs Services.

import { readFileSync, writeFileSync } from 'node:fs';
import { systemClock } from '../base/clock.ts';
import { parseCommandLine } from '../config/index.ts';
import { createLogger } from '../log/index.ts';
import { connect, Protocol } from '../netlink/core/index.ts';
import { NftClient } from '../netlink/nftables/index.ts';
import { createNotifier } from './sd-notify.ts';

export const STANDIN_TABLE = 'kpts_standin';

export async function main(argv) {
  const r = parseCommandLine(argv, { version: 'v0.0.0-standin' });
  if (r.kind === 'exit') {
    process.stdout.write(r.stdout);
    process.stderr.write(r.stderr);
    return r.code;
  }
  const log = createLogger({ verbosity: r.config.logging.verbosity, format: r.config.logging.format });
  const notifier = createNotifier({ clock: systemClock, logger: log });
  log.info('kpts-standin: starting', { action: r.action, mode: r.config.mode, configFile: r.configFile ?? '' });
  for (const w of r.warnings) log.warn(`kpts-standin: config warning: ${w}`);
  log.warn('kpts-standin: a warning line', { priority: 'warning' });
  log.error('kpts-standin: an error line', { priority: 'err' });

  // A /proc/sys/net write (the same value back), as the daemon's sysctl settings need.
  const sysctl = '/proc/sys/net/ipv4/conf/all/route_localnet';
  try {
    const v = readFileSync(sysctl, 'utf8').trim();
    writeFileSync(sysctl, `${v}\n`);
    log.info('kpts-standin: sysctl write ok', { path: sysctl, value: v });
  } catch (err) {
    log.error('kpts-standin: sysctl write failed', { path: sysctl, err });
  }

  // A real nf_tables batch over netlink: CAP_NET_ADMIN, AF_NETLINK and the syscall filter.
  const conn = connect(Protocol.NETFILTER, { timeoutMs: 10_000 });
  try {
    const nft = new NftClient({ family: 'ip', table: STANDIN_TABLE, transport: conn });
    const tx = nft.newTransaction();
    tx.add({ kind: 'table', comment: 'kube-proxy-ts systemd boot test stand-in' });
    await nft.run(tx);
    log.info('kpts-standin: nftables table programmed', { table: `ip ${STANDIN_TABLE}` });
  } catch (err) {
    log.error('kpts-standin: nftables batch failed', { err });
  } finally {
    conn.close();
  }

  notifier.status('kpts-standin: serving (stand-in for the daemon main)');
  notifier.ready();
  notifier.startWatchdog(() => true);
  log.info('kpts-standin: ready', { watchdogMs: notifier.watchdogUsecMs ?? 0 });

  await new Promise((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  notifier.stopping();
  notifier.stopWatchdog();
  log.info('kpts-standin: stopping; rules are left in place');
  await log.close();
  return 0;
}
