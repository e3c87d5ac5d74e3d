// Upstream's /statusz and /flagz pages (k8s.io/apiserver/pkg/server/statusz and flagz, v1.37):
// a text page for people (the default), and the structured config.k8s.io Statusz/Flagz
// objects for a client that asks for them by Accept header
// (application/json;as=Statusz;v=v1beta1;g=config.k8s.io). The text repeats upstream's format,
// including the delimiter picked at random per answer, which upstream uses to keep anyone from
// parsing the text page.

export const ZPAGES_WARNING =
  'Warning: This endpoint is not meant to be machine parseable, has no formatting compatibility guarantees and is for debugging purposes only.';

/** Upstream's delimiters; each answer uses one of them. */
export const ZPAGES_DELIMITERS: readonly string[] = [':', ': ', '=', ' '];

export const pickDelimiter = (random: () => number = Math.random): string =>
  ZPAGES_DELIMITERS[Math.min(ZPAGES_DELIMITERS.length - 1, Math.floor(random() * ZPAGES_DELIMITERS.length))]!;

const header = (component: string, page: string): string => `\n${component} ${page}\n${ZPAGES_WARNING}\n`;

export interface StatuszInfo {
  component: string;
  startMs: number;
  nowMs: number;
  /** Upstream's "Go version" line: our runtime's version (Node.js). */
  runtimeVersion: string;
  binaryVersion: string;
  /** The upstream release whose behaviour this build follows. */
  emulationVersion?: string;
  /** The served paths; shown by their first segment, sorted, as upstream aggregates them. */
  paths: readonly string[];
}

/** Go's "%d hr %02d min %02d sec". */
export function uptimeText(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${Math.floor(s / 3600)} hr ${pad(Math.floor(s / 60) % 60)} min ${pad(s % 60)} sec`;
}

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/** Go's time.UnixDate layout ("Mon Jan _2 15:04:05 MST 2006"), in UTC. */
export function unixDate(ms: number): string {
  const d = new Date(ms);
  const pad = (n: number) => String(n).padStart(2, '0');
  const day = String(d.getUTCDate()).padStart(2, ' ');
  const time = `${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}`;
  return `${DAYS[d.getUTCDay()]} ${MONTHS[d.getUTCMonth()]} ${day} ${time} UTC ${d.getUTCFullYear()}`;
}

/** "/healthz/ping", "/metrics/slis" -> "/healthz", "/metrics": sorted, each once. */
export function aggregatePaths(paths: readonly string[]): string[] {
  const firsts = paths.map((p) => p.split('/')[1] ?? '').filter((p) => p !== '');
  return [...new Set(firsts.map((p) => `/${p}`))].sort();
}

export function statuszText(s: StatuszInfo, delim: string): string {
  const emulation = s.emulationVersion !== undefined ? `Emulation version${delim} ${s.emulationVersion}` : '';
  const paths = aggregatePaths(s.paths).join(' ');
  const lines = [
    `Started${delim} ${unixDate(s.startMs)}`,
    `Up${delim} ${uptimeText((s.nowMs - s.startMs) / 1000)}`,
    `Go version${delim} ${s.runtimeVersion}`,
    `Binary version${delim} ${s.binaryVersion}`,
    emulation,
    paths !== '' ? `Paths${delim} ${paths}` : '',
  ];
  return `${header(s.component, 'statusz')}\n${lines.join('\n')}\n`;
}

/** Every flag and its value, sorted by name, one a line. */
export function flagzText(component: string, flags: Readonly<Record<string, string>>, delim: string): string {
  const lines = Object.keys(flags)
    .sort()
    .map((k) => `${k}${delim}${flags[k]}\n`);
  return `${header(component, 'flagz')}${lines.join('')}`;
}

export function statuszObject(s: StatuszInfo, version: 'v1alpha1' | 'v1beta1'): Record<string, unknown> {
  return {
    kind: 'Statusz',
    apiVersion: `config.k8s.io/${version}`,
    metadata: { name: s.component },
    startTime: new Date(Math.floor(s.startMs / 1000) * 1000).toISOString().replace('.000Z', 'Z'),
    uptimeSeconds: Math.max(0, Math.floor((s.nowMs - s.startMs) / 1000)),
    goVersion: s.runtimeVersion,
    binaryVersion: s.binaryVersion,
    ...(s.emulationVersion !== undefined ? { emulationVersion: s.emulationVersion } : {}),
    paths: aggregatePaths(s.paths),
  };
}

export function flagzObject(
  component: string,
  flags: Readonly<Record<string, string>>,
  version: 'v1alpha1' | 'v1beta1',
): Record<string, unknown> {
  return { kind: 'Flagz', apiVersion: `config.k8s.io/${version}`, metadata: { name: component }, flags };
}

export type ZPageFormat = { kind: 'text' } | { kind: 'json'; version: 'v1alpha1' | 'v1beta1' } | { kind: 'none' };

/**
 * What an Accept header asks of a page whose structured kind is `kind` ("Statusz", "Flagz"): no
 * header, text/plain, text/* or *\/* give the text page; application/json with as=KIND,
 * g=config.k8s.io and v=v1alpha1|v1beta1 the object; anything else nothing (406), as upstream.
 */
export function negotiateZPage(accept: string | undefined, kind: string): ZPageFormat {
  if (accept === undefined || accept.trim() === '') return { kind: 'text' };
  const ranges = accept
    .split(',')
    .map((part, i) => {
      const [type = '', ...params] = part.split(';').map((x) => x.trim());
      const p = Object.fromEntries(params.map((kv) => kv.split('=').map((x) => x.trim().toLowerCase())));
      const q = p['q'] === undefined ? 1 : Number(p['q']);
      return { type: type.toLowerCase(), p, q: Number.isFinite(q) ? q : 0, i };
    })
    .filter((r) => r.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  for (const r of ranges) {
    const structured = r.p['as'] !== undefined || r.p['g'] !== undefined || r.p['v'] !== undefined;
    if (!structured && (r.type === 'text/plain' || r.type === 'text/*' || r.type === '*/*')) return { kind: 'text' };
    const v = r.p['v'];
    if (
      r.type === 'application/json' &&
      r.p['as'] === kind.toLowerCase() &&
      r.p['g'] === 'config.k8s.io' &&
      (v === 'v1alpha1' || v === 'v1beta1')
    )
      return { kind: 'json', version: v };
  }
  return { kind: 'none' };
}
