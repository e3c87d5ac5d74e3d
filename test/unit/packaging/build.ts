// Builds the .deb and .rpm once per run (or reuses them when nothing they are made from
// changed): scripts/package.sh --if-stale, which holds a lock, so the packaging unit tests
// and the systemd boot test share one build. System tools are called by absolute path.

import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const REPO = resolve(import.meta.dirname, '../../..');
export const OUT = process.env.KPTS_PACKAGES_DIR ?? join(REPO, 'out/packages');

export interface Packages {
  deb: string;
  rpm: string;
  version: string;
  /** What package.sh printed (built or reused, sizes, timing). */
  log: string;
}

/** Tools the packaging tests need; empty when all are present. */
export function missingTools(): string[] {
  return [
    '/usr/bin/dpkg-buildpackage',
    '/usr/bin/dh',
    '/usr/bin/rpmbuild',
    '/usr/bin/rpm',
    '/usr/bin/dpkg-deb',
    '/usr/bin/lintian',
    '/usr/bin/systemd-analyze',
  ].filter((p) => !existsSync(p));
}

let built: Packages | undefined;

/**
 * Asynchronous on purpose: a build takes minutes, and ava's worker must stay responsive
 * (a blocked event loop cannot tell ava about t.timeout, and the run times out).
 */
export async function ensurePackages(): Promise<Packages> {
  if (built) return built;
  const r = await toolAsync('/bin/bash', [join(REPO, 'scripts/package.sh'), '--if-stale', OUT], {
    allowFail: true,
    timeoutMs: 1_200_000,
  });
  if (r.status !== 0) throw new Error(`scripts/package.sh failed (status ${r.status}):\n${r.stdout}\n${r.stderr}`);
  const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  const files = readdirSync(OUT);
  const deb = files.find((f) => f.startsWith(`kube-proxy-ts_${version}_`) && f.endsWith('.deb'));
  const rpm = files.find((f) => f.startsWith(`kube-proxy-ts-${version}-`) && f.endsWith('.rpm'));
  if (!deb || !rpm) throw new Error(`package.sh left no packages in ${OUT}: ${files.join(', ')}`);
  built = { deb: join(OUT, deb), rpm: join(OUT, rpm), version, log: r.stdout };
  return built;
}

/** tool(), without blocking the event loop (for the slow ones: package.sh, lintian). */
export function toolAsync(
  cmd: string,
  args: readonly string[],
  opts: { allowFail?: boolean; timeoutMs?: number } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    execFile(
      cmd,
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: opts.timeoutMs ?? 300_000 },
      (err, stdout, stderr) => {
        const status =
          err === null
            ? 0
            : typeof (err as { code?: unknown }).code === 'number'
              ? (err as { code: number }).code
              : null;
        if (!opts.allowFail && status !== 0)
          reject(new Error(`${cmd} ${args.join(' ')} failed (status ${status}):\n${stderr}${stdout}`));
        else resolve({ status, stdout, stderr });
      },
    );
  });
}

/** Runs a system tool (absolute path); returns stdout, throwing with stderr on failure. */
export function tool(
  cmd: string,
  args: readonly string[],
  opts: { allowFail?: boolean; env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(cmd, args, {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: opts.timeoutMs ?? 300_000,
    ...(opts.env ? { env: opts.env } : {}),
  });
  if (!opts.allowFail && r.status !== 0)
    throw new Error(`${cmd} ${args.join(' ')} failed (status ${r.status}):\n${r.stderr}${r.stdout}`);
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}
