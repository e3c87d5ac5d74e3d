// The SysctlWriter the proxiers need (IPVS: net/ipv4/vs/conntrack, ip_forward, ...; iptables:
// route_localnet). Kernel
// settings under /proc/sys have no netlink interface, so this is the daemon's one write
// outside netlink; proxiers never touch /proc themselves.

import { errorMessage } from '../base/errors.ts';
import { readFile, writeFile } from 'node:fs/promises';
import type { SysctlWriter } from '../proxier/types.ts';

export class ProcSysctl implements SysctlWriter {
  private readonly root: string;

  constructor(root = '/proc/sys') {
    this.root = root;
  }

  async set(path: string, value: number): Promise<void> {
    if (!/^[a-z0-9_]+(\/[a-z0-9_.-]+)+$/i.test(path)) throw new Error(`sysctl ${path}: not a sysctl path`);
    const file = `${this.root}/${path}`;
    try {
      // Unchanged values are not rewritten (some sysctls log or reset state on every write).
      if ((await readFile(file, 'utf8')).trim() === String(value)) return;
      await writeFile(file, `${value}\n`);
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? errorMessage(e);
      throw new Error(`sysctl ${path}=${value}: ${code}`);
    }
  }
}
