// One truth for the proxy modes: every text an operator reads that lists the modes carries
// modeList() (src/config/modes.ts) word for word, and no text calls another mode the default
// or the recommended one, or names a smaller mode set in the stale "nftables/IPVS" way.
// A mode added, removed or renamed in the code fails here until every text says so.
import test from 'ava';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseFlags } from '../../../src/config/flags.ts';
import { completionScript } from '../../../src/cli/completion.ts';
import { DEFAULT_MODE, PROXY_MODES, RECOMMENDED_MODE, modeList } from '../../../src/config/modes.ts';
import { FLAGS } from '../../../src/config/flags.ts';
import { renderManPage } from '../../../scripts/gen-manpage.ts';

const root = new URL('../../../', import.meta.url).pathname;
const read = (p: string): string => readFileSync(join(root, p), 'utf8');

/** Whitespace, markdown emphasis and roff escapes out of the way; case kept apart. */
function plain(text: string): string {
  return text
    .replaceAll(/\\f[BIRP]|\\&/g, '')
    .replaceAll('\\-', '-')
    .replaceAll(/[`*]/g, '')
    .replaceAll(/\s+/g, ' ')
    .toLowerCase();
}

const helpText = (): string => {
  const r = parseFlags(['--help'], 'v0', 80);
  if (r.ok || r.kind !== 'help') throw new Error('no help');
  return r.output;
};

/** The texts that list the modes, and so must carry modeList(). */
const LISTING: Record<string, () => string> = {
  'README.md': () => read('README.md'),
  'docs/migrating.md': () => read('docs/migrating.md'),
  'deploy/README.md': () => read('deploy/README.md'),
  'debian/control': () => read('debian/control'),
  'packaging/kube-proxy-ts.spec': () => read('packaging/kube-proxy-ts.spec'),
  '--help': helpText,
  '--proxy-mode help': () => FLAGS.find((f) => f.name === 'proxy-mode')!.help,
  'man page': () => renderManPage(FLAGS, { version: 'v0' }),
};

/** Every text an operator reads about modes: the listing ones, the rest of docs/, the unit. */
const ALL: Record<string, () => string> = {
  ...LISTING,
  ...Object.fromEntries(
    readdirSync(join(root, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .map((f) => [`docs/${f}`, () => read(`docs/${f}`)]),
  ),
  'packaging/README.md': () => read('packaging/README.md'),
  'systemd/kube-proxy-ts.service': () => read('systemd/kube-proxy-ts.service'),
  'packaging/config.yaml': () => read('packaging/config.yaml'),
  'deploy/configmap.yaml': () => read('deploy/configmap.yaml'),
};

const MODE = `(${PROXY_MODES.join('|')})`;

/** Claims about modes that contradict the code, as "what it says" strings. */
export function modeContradictions(text: string): string[] {
  const t = plain(text);
  const out: string[] = [];
  const claim = (re: RegExp, expected: string, what: string): void => {
    for (const m of t.matchAll(re)) if (m[1] !== expected) out.push(`${what}: "${m[0]}" (the code: ${expected})`);
  };
  // "nftables (the default)", "nftables mode is the default", "the default mode, nftables", `mode: ""` means nftables
  claim(
    new RegExp(
      `\\b${MODE}(?: mode)?,? (?:\\((?:the )?default(?:[),;]| when| mode| as)|(?:is|as) (?:the )?default\\b)`,
      'g',
    ),
    DEFAULT_MODE,
    'default',
  );
  claim(new RegExp(`\\bdefault(?: proxy)? mode(?: is|,|:)? ${MODE}\\b`, 'g'), DEFAULT_MODE, 'default');
  claim(new RegExp(`""[^.]{0,30}?\\b(?:means|becomes|is|gets|runs) (?:the )?${MODE}\\b`, 'g'), DEFAULT_MODE, 'blank');
  claim(new RegExp(`\\b${MODE}(?: mode)? \\((?:the )?recommended`, 'g'), RECOMMENDED_MODE, 'recommended');
  claim(new RegExp(`\\brecommended(?: mode)?(?: is|,|:) ${MODE}\\b`, 'g'), RECOMMENDED_MODE, 'recommended');
  // A slash list of modes ("nftables/IPVS") reads as the set of modes: it must be all of them
  // (a path such as src/netlink/nftables/iptables is not a list).
  for (const m of t.matchAll(new RegExp(`(?<![\\w./-])${MODE}(?:/${MODE})+(?![\\w/])`, 'g'))) {
    const named = new Set(m[0].split('/'));
    if (named.size !== PROXY_MODES.length) out.push(`mode set: "${m[0]}" (the code: ${PROXY_MODES.join('/')})`);
  }
  for (const stale of ['not available in this build', 'no iptables mode', 'has no iptables', 'iptables mode is not']) {
    if (t.includes(stale)) out.push(`stale: "${stale}"`);
  }
  return out;
}

test("every text that lists the modes carries the code's list", (t) => {
  const phrase = plain(modeList());
  for (const [where, text] of Object.entries(LISTING))
    t.true(plain(text()).includes(phrase), `${where} lacks "${modeList()}"`);
});

test('no text names another default, recommendation or mode set than the code', (t) => {
  for (const [where, text] of Object.entries(ALL)) t.deepEqual(modeContradictions(text()), [], where);
});

test('the packaged config and the DaemonSet ConfigMap name the recommended mode', (t) => {
  for (const p of ['packaging/config.yaml', 'deploy/configmap.yaml'])
    t.regex(read(p), new RegExp(`^\\s*mode: ${RECOMMENDED_MODE}$`, 'm'), p);
});

test('the shell completion offers every mode', (t) => {
  const arm = /--proxy-mode\) COMPREPLY=\(\$\(compgen -W "([^"]*)"/.exec(completionScript('bash'));
  t.deepEqual(arm?.[1]?.split(' ').sort(), [...PROXY_MODES].sort());
});

test('the checker catches what it is for', (t) => {
  t.is(modeContradictions('kube-proxy-ts runs `nftables` (the default) and `ipvs`').length, 1);
  t.is(modeContradictions('`mode: ""` means nftables here').length, 1);
  t.is(modeContradictions('Kubernetes network proxy (nftables/IPVS over netlink)').length, 1);
  t.is(modeContradictions('is not available in this build yet').length, 1);
  t.deepEqual(modeContradictions(`modes: ${modeList()}; a blank mode means ${DEFAULT_MODE}`), []);
});
