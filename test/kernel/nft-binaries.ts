// The nft binaries that the interop tests print and reload our rulesets with (issue 4): the
// rulesets the daemon writes must print cleanly and round-trip not only with Debian 12's nft
// but with a newer one too, installed under .cache by scripts/newer-nft.sh (run by setup.sh).
//
// Each binary is compared only with itself: two nft versions may print the same ruleset
// slightly differently (text or JSON), so "the same ruleset" means the same JSON from the
// same binary.
//
// The round trip goes through the text printout only (`nft list ruleset` loaded back with
// `nft -f`): neither version reloads its own JSON printout of a map keyed by numgen, even one
// nft made itself from text. nft 1.0.6 refuses a map whose data is a concatenation ("Invalid
// map type 'ipv6_addr . inet_service'"); nft 1.1.3 loses `typeof numgen ...` (a `typeof
// numgen random mod 2 : ip daddr` map comes back as `type 0 : ipv4_addr`) and, for
// `typeof meta l4proto . numgen random mod 2 : verdict`, then aborts when listing it
// (mergesort.c:23: concat_expr_msort_value: Assertion `ilen > 0' failed). The JSON printout
// is still checked to print cleanly, and is what the rulesets are compared by.
import { accessSync, constants as fsConstants } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ExecutionContext } from 'ava';
import { netnsFor } from '../helpers/netns.ts';
import type { Netns, NftJsonObject } from '../helpers/netns.ts';
import { normaliseNftJson } from '../helpers/nft-json.ts';

export interface NftBinary {
  /** Names the binary in assertion messages. */
  readonly name: string;
  readonly path: string;
}

export const NFT_BINARIES: readonly NftBinary[] = [
  { name: 'nft 1.0.6 (Debian 12)', path: '/usr/sbin/nft' },
  { name: 'nft 1.1.3 (Debian 13)', path: fileURLToPath(new URL('../../.cache/nft/1.1.3/sbin/nft', import.meta.url)) },
];

/**
 * What nft prints when it meets something it cannot decode: "unknown" (e.g. `# unknown
 * expression`, `unknown type`), "unsupported", or a raw expression or type in brackets
 * (`[invalid type]`, `[ payload load ...`). Not "invalid" alone: `ct state invalid` is fine.
 */
const UNDECODED = /unknown|unsupported|\[ ?[a-z]+ /i;

/** Throws (so the test fails, never skips) when a binary is not installed. */
export function ensureInstalled(nft: NftBinary): void {
  try {
    accessSync(nft.path, fsConstants.X_OK);
  } catch {
    throw new Error(`${nft.name} is not installed at ${nft.path}: run scripts/setup.sh`);
  }
}

export interface Printout {
  /** `nft list ruleset`. */
  text: string;
  /** `nft -j list ruleset`, metainfo left out. */
  json: NftJsonObject[];
}

/** Prints a namespace's ruleset with one binary, as text and as JSON, and checks it printed cleanly. */
export async function printRuleset(t: ExecutionContext, nft: NftBinary, ns: Netns): Promise<Printout> {
  ensureInstalled(nft);
  const listed = await ns.exec(nft.path, ['list', 'ruleset']);
  t.is(listed.code, 0, `${nft.name}: list ruleset: ${listed.stderr}`);
  t.is(listed.stderr, '', `${nft.name}: list ruleset warned`);
  t.notRegex(listed.stdout, UNDECODED, `${nft.name} printed something it could not decode`);
  const listedJson = await ns.exec(nft.path, ['-j', 'list', 'ruleset']);
  t.is(listedJson.code, 0, `${nft.name}: -j list ruleset: ${listedJson.stderr}`);
  t.is(listedJson.stderr, '', `${nft.name}: -j list ruleset warned`);
  t.notRegex(listedJson.stdout, UNDECODED, `${nft.name} printed JSON it could not decode`);
  // nft 1.0.6 prints nothing at all for an empty ruleset.
  const json =
    listedJson.stdout.trim() === '' ? [] : (JSON.parse(listedJson.stdout) as { nftables: NftJsonObject[] }).nftables;
  return { text: listed.stdout, json: json.filter((o) => !('metainfo' in o)) };
}

/** Loads nft input with one binary into a fresh namespace, and checks it loaded without a word. */
export async function loadFresh(t: ExecutionContext, nft: NftBinary, input: string, label: string): Promise<Netns> {
  ensureInstalled(nft);
  const ns = await netnsFor(t, label);
  const load = await ns.exec(nft.path, ['-f', '-'], { input });
  t.is(load.code, 0, `${nft.name} could not load it: ${load.stderr}\n--- input ---\n${input}`);
  t.is(load.stderr, '', `${nft.name} warned while loading`);
  return ns;
}

/**
 * The round trip with one binary: it prints `source`'s ruleset cleanly, as text and as JSON,
 * and the text printout, loaded by the same binary into a fresh namespace, gives back the
 * same ruleset as that binary's JSON shows it. Returns the printout and the namespace it went
 * into, for further checks (e.g. the bytecode nft wrote there).
 */
export async function roundTrip(
  t: ExecutionContext,
  nft: NftBinary,
  source: Netns,
  label: string,
): Promise<{ printout: Printout; fromText: Netns }> {
  const printout = await printRuleset(t, nft, source);
  const original = normaliseNftJson(printout.json);
  const fromText = await loadFresh(t, nft, printout.text, label);
  t.deepEqual(
    normaliseNftJson(await fromText.nftJson(nft.path)),
    original,
    `${nft.name}: its text printout reloads to a different ruleset`,
  );
  return { printout, fromText };
}
