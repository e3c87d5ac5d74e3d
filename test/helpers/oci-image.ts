// The OCI image `npm run image` builds (scripts/image.sh): built once per run, or reused
// when nothing it is made from changed (--if-stale, under a lock), then read as any runtime
// reads an image layout: index.json -> manifest -> config and layers, unpacked in order.

import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export const REPO = resolve(import.meta.dirname, '../..');
export const IMAGE_DIR = process.env.KPTS_IMAGE_DIR ?? join(REPO, 'out/image');

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface OciImage {
  /** The OCI layout directory. */
  layout: string;
  /** The tarball of that layout. */
  tarball: string;
  /** What image.sh printed (built or reused, sizes). */
  log: string;
  manifest: { config: Descriptor; layers: Descriptor[] };
  config: {
    architecture: string;
    os: string;
    created: string;
    config: {
      Entrypoint?: string[];
      Cmd?: string[];
      Env?: string[];
      ExposedPorts?: Record<string, object>;
      User?: string;
    };
    rootfs: { diff_ids: string[] };
  };
}

function run(
  cmd: string,
  args: readonly string[],
  timeoutMs: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      cmd,
      args,
      { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: timeoutMs },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
        done({ code, stdout, stderr });
      },
    );
  });
}

const blob = (layout: string, digest: string): string => join(layout, 'blobs', ...digest.split(':'));

let built: OciImage | undefined;

/** Builds (or reuses) the image; asynchronous so that ava's worker stays responsive. */
export async function ensureImage(): Promise<OciImage> {
  if (built) return built;
  const r = await run('/bin/bash', [join(REPO, 'scripts/image.sh'), '--if-stale', IMAGE_DIR], 1_200_000);
  if (r.code !== 0) throw new Error(`scripts/image.sh failed (status ${r.code}):\n${r.stdout}\n${r.stderr}`);
  const layout = join(IMAGE_DIR, 'oci');
  const index = JSON.parse(readFileSync(join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  if (index.manifests.length !== 1)
    throw new Error(`${layout}/index.json: expected one manifest, found ${index.manifests.length}`);
  const manifest = JSON.parse(readFileSync(blob(layout, index.manifests[0]!.digest), 'utf8')) as OciImage['manifest'];
  const config = JSON.parse(readFileSync(blob(layout, manifest.config.digest), 'utf8')) as OciImage['config'];
  const version = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
  built = {
    layout,
    tarball: join(IMAGE_DIR, `kube-proxy-ts_${version}_amd64.oci.tar`),
    log: r.stdout,
    manifest,
    config,
  };
  return built;
}

/** Unpacks the layers into `dest` (an empty directory), as root, keeping owners and modes. */
export async function unpackImage(img: OciImage, dest: string): Promise<void> {
  for (const layer of img.manifest.layers) {
    if (layer.mediaType !== 'application/vnd.oci.image.layer.v1.tar+gzip')
      throw new Error(`layer ${layer.digest}: unexpected media type ${layer.mediaType}`);
    const r = await run(
      '/usr/bin/tar',
      ['-xzf', blob(img.layout, layer.digest), '-C', dest, '--numeric-owner', '--same-permissions'],
      120_000,
    );
    if (r.code !== 0) throw new Error(`unpacking ${layer.digest}: ${r.stderr}`);
  }
}

/** The size of a blob as the layout stores it. */
export function blobPath(img: OciImage, digest: string): string {
  return blob(img.layout, digest);
}
