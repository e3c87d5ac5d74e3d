// The set-up kernel tests share to run the real daemon as node-a of the test cluster: a
// temporary manifest directory that goes away with the test, and the daemon's usual flags
// (its node name, the pod CIDR, healthz and metrics on loopback), each test adding its own.

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ExecutionContext } from 'ava';
import type { DaemonProcess } from './daemon-process.ts';
import { spawnDaemon } from './daemon-process.ts';
import type { Netns } from './netns.ts';

/** A fresh directory under the system temporary one (`kpts-<name>-…`), removed at the test's teardown. */
export async function tempDir(t: ExecutionContext, name: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), `kpts-${name}-`));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** Where the daemon reads its Services from: a manifest directory (standalone) or an API server. */
export type ServiceSource = { readonly manifestDir: string } | { readonly master: string };

export interface NodeFlags {
  /** `--cluster-cidr 10.244.0.0/16` (the test cluster's pods) unless false. */
  readonly clusterCIDR?: boolean;
  /** `--healthz-bind-address`; 127.0.0.1:10256 unless given ('' turns the server off). */
  readonly healthz?: string;
  /** `--metrics-bind-address`; 127.0.0.1:10249 unless given ('' turns the server off). */
  readonly metrics?: string;
}

/** The daemon's flags as node-a in `mode`, Services from `source`, then `extra`. */
export function nodeDaemonArgs(
  mode: string,
  source: ServiceSource,
  extra: readonly string[] = [],
  flags: NodeFlags = {},
): string[] {
  return [
    '--proxy-mode',
    mode,
    ...('manifestDir' in source ? ['--manifest-dir', source.manifestDir] : ['--master', source.master]),
    '--hostname-override',
    'node-a',
    ...(flags.clusterCIDR === false ? [] : ['--cluster-cidr', '10.244.0.0/16']),
    '--healthz-bind-address',
    flags.healthz ?? '127.0.0.1:10256',
    '--metrics-bind-address',
    flags.metrics ?? '127.0.0.1:10249',
    ...extra,
  ];
}

/** spawnDaemon in `ns`, killed at the test's teardown. */
export function startDaemon(
  t: ExecutionContext,
  ns: Netns,
  args: readonly string[],
  opts?: Parameters<typeof spawnDaemon>[2],
): DaemonProcess {
  const d = spawnDaemon(ns, args, opts);
  t.teardown(() => d.kill());
  return d;
}
