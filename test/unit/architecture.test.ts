// Enforces the dependency rules of docs/ARCHITECTURE.md by reading every import in src/
// with the TypeScript compiler. A failure names the file and the forbidden edge.
import test from 'ava';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const src = join(root, 'src');

interface Edge {
  from: string; // src-relative file
  to: string; // src-relative file, or a package name ("netlink-socket", "node:fs")
  typeOnly: boolean;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : p.endsWith('.ts') ? [p] : [];
  });
}

function edgesOf(file: string): Edge[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
  const from = relative(src, file);
  const out: Edge[] = [];
  const add = (spec: string, typeOnly: boolean): void => {
    const to = spec.startsWith('.') ? relative(src, resolve(dirname(file), spec)) : spec;
    out.push({ from, to, typeOnly });
  };
  const visit = (n: ts.Node): void => {
    if (ts.isImportDeclaration(n) && ts.isStringLiteral(n.moduleSpecifier)) {
      const clause = n.importClause;
      const typeOnly =
        !!clause &&
        (clause.isTypeOnly ||
          (!clause.name &&
            !!clause.namedBindings &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      add(n.moduleSpecifier.text, typeOnly);
    } else if (ts.isExportDeclaration(n) && n.moduleSpecifier && ts.isStringLiteral(n.moduleSpecifier)) {
      add(n.moduleSpecifier.text, n.isTypeOnly);
    } else if (
      ts.isCallExpression(n) &&
      n.expression.kind === ts.SyntaxKind.ImportKeyword &&
      n.arguments[0] &&
      ts.isStringLiteral(n.arguments[0])
    ) {
      add(n.arguments[0].text, false);
    } else if (
      ts.isCallExpression(n) &&
      ts.isIdentifier(n.expression) &&
      n.expression.text === 'require' &&
      n.arguments[0] &&
      ts.isStringLiteral(n.arguments[0])
    ) {
      add(n.arguments[0].text, false);
    }
    ts.forEachChild(n, visit);
  };
  visit(sf);
  return out;
}

const edges = files(src).flatMap(edgesOf);
const srcFiles = new Set(files(src).map((f) => relative(src, f)));
const area = (p: string): string =>
  p
    .split('/')
    .slice(0, p.startsWith('netlink/') || p.startsWith('proxier/') ? 2 : 1)
    .join('/');
const isPackage = (to: string): boolean =>
  !to.startsWith('..') && !to.includes('/') ? true : !to.endsWith('.ts') && !to.startsWith('.');
const IO_MODULES = [
  'node:net',
  'node:dgram',
  'node:http',
  'node:https',
  'node:fs',
  'node:fs/promises',
  'node:child_process',
  'netlink-socket',
  '@kubernetes/client-node',
  'winston',
  'prom-client',
  'yaml',
  'sd-notify',
];

function violations(rule: (e: Edge) => string | undefined): string[] {
  return edges
    .map((e) => {
      const why = rule(e);
      return why ? `${e.from} -> ${e.to}: ${why}` : undefined;
    })
    .filter((v): v is string => v !== undefined);
}

test('the edge reader sees imports (sanity: the core imports its siblings)', (t) => {
  t.true(edges.some((e) => e.from === 'netlink/core/connection.ts' && e.to === 'netlink/core/bytes.ts'));
  t.true(edges.some((e) => e.from === 'netlink/core/raw-socket.ts' && e.to === 'netlink-socket'));
});

test('no child_process anywhere in src/', (t) => {
  t.deepEqual(
    violations((e) =>
      e.to === 'child_process' || e.to === 'node:child_process' ? 'src/ never starts a process' : undefined,
    ),
    [],
  );
  for (const f of files(src))
    t.notRegex(readFileSync(f, 'utf8'), /\b(execSync|spawnSync|execFile|child_process)\b/, relative(src, f));
});

test('base/ and model/ do no I/O; model/ imports only base/', (t) => {
  t.deepEqual(
    violations((e) => {
      const a = area(e.from);
      if (a !== 'base' && a !== 'model') return undefined;
      if (IO_MODULES.includes(e.to)) return `${a}/ does no I/O`;
      if (a === 'model' && !isPackage(e.to) && !['base', 'model'].includes(area(e.to)))
        return 'model/ imports only base/';
      if (a === 'base' && !isPackage(e.to) && area(e.to) !== 'base') return 'base/ imports nothing of ours';
      return undefined;
    }),
    [],
  );
});

test('netlink/core knows nothing of Kubernetes; subsystems import only the core', (t) => {
  t.deepEqual(
    violations((e) => {
      if (!e.from.startsWith('netlink/')) return undefined;
      const from = area(e.from);
      if (e.to === '@kubernetes/client-node') return 'netlink/ knows nothing of Kubernetes';
      if (isPackage(e.to)) return undefined;
      const to = area(e.to);
      if (to === from || to === 'base' || to === 'netlink/core') return undefined;
      return from === 'netlink/core'
        ? 'netlink/core imports only base/'
        : 'a netlink subsystem imports only netlink/core';
    }),
    [],
  );
});

test('sources/ never reach the kernel, proxiers or health', (t) => {
  t.deepEqual(
    violations((e) => {
      if (area(e.from) !== 'sources' || isPackage(e.to)) return undefined;
      return ['sources', 'model', 'base'].includes(area(e.to)) ? undefined : 'sources/ import model/ and base/ only';
    }),
    [],
  );
});

const IPTABLES_NFT_USERS = new Set(['proxier/iptables', 'proxier/userspace', 'proxier/ipvs']);

test('a proxier imports model/ and netlink/, never another mode or the wiring', (t) => {
  t.deepEqual(
    violations((e) => {
      if (!e.from.startsWith('proxier/') || isPackage(e.to)) return undefined;
      const from = area(e.from);
      const to = area(e.to);
      if (to === from || to === 'model' || to === 'base' || to.startsWith('netlink/')) return undefined;
      if (to === 'proxier/types.ts' || e.to === 'proxier/types.ts') return undefined;
      // The iptables-nft writer shared by the modes whose rules are iptables rules.
      if (to === 'proxier/iptables-nft' && IPTABLES_NFT_USERS.has(from)) return undefined;
      // The drift watches (the kernel's change announcements) shared by the modes.
      if (to === 'proxier/drift') return undefined;
      return 'a proxier imports model/, base/, netlink/, proxier/types.ts, drift/ (and iptables-nft/: iptables, userspace, ipvs) only';
    }),
    [],
  );
});

test('conntrack/ uses model/ and netlink; health/ and metrics/ see model/ types only', (t) => {
  t.deepEqual(
    violations((e) => {
      const a = area(e.from);
      if (isPackage(e.to)) return undefined;
      const to = area(e.to);
      if (a === 'conntrack' && !['conntrack', 'model', 'base', 'netlink/conntrack', 'netlink/core'].includes(to))
        return 'conntrack/ imports model/, base/ and netlink/conntrack only';
      if ((a === 'health' || a === 'metrics') && to === 'model' && !e.typeOnly)
        return `${a}/ may import model/ types only`;
      if ((a === 'health' || a === 'metrics') && !['health', 'metrics', 'model', 'base'].includes(to))
        return `${a}/ imports base/ and model/ types only`;
      return undefined;
    }),
    [],
  );
});

test('nothing imports daemon/, the only composition root', (t) => {
  t.deepEqual(
    violations((e) =>
      !isPackage(e.to) && area(e.to) === 'daemon' && area(e.from) !== 'daemon'
        ? 'daemon/ is imported by none'
        : undefined,
    ),
    [],
  );
});

test('explain/ is pure; control/ is the socket only; cli/ talks to the daemon through control/', (t) => {
  t.deepEqual(
    violations((e) => {
      const a = area(e.from);
      const to = isPackage(e.to) ? e.to : area(e.to);
      if (a === 'explain') {
        if (IO_MODULES.includes(e.to)) return 'explain/ does no I/O';
        if (isPackage(e.to)) return undefined;
        // proxier/types.ts is the proxiers' contract: types and constant tables (the one mode
        // list, what each mode supports), no code that does I/O.
        if (e.to === 'proxier/types.ts') return undefined;
        return ['explain', 'model', 'base'].includes(to)
          ? undefined
          : 'explain/ imports model/, base/ and proxier/types.ts only';
      }
      if (a === 'control' && !isPackage(e.to) && !['control', 'base'].includes(to))
        return 'control/ imports base/ only';
      if (a === 'cli' && !isPackage(e.to) && !['cli', 'control', 'explain', 'config', 'base'].includes(to))
        return 'cli/ imports control/, explain/, config/ and base/ only';
      return undefined;
    }),
    [],
  );
});

test('leftovers/ and live-trace/ do kernel work below the daemon: base/, netlink/ (and proxier/, explain/ types)', (t) => {
  t.deepEqual(
    violations((e) => {
      const a = area(e.from);
      if ((a !== 'leftovers' && a !== 'live-trace') || isPackage(e.to)) return undefined;
      const to = area(e.to);
      if (to === a || to === 'base' || to.startsWith('netlink/')) return undefined;
      // The sweep knows each mode's names (and asks the nftables proxier to drop its table).
      if (a === 'leftovers' && to.startsWith('proxier/')) return undefined;
      // A live trace answers the query explain/ defines.
      if (a === 'live-trace' && to === 'explain' && e.typeOnly) return undefined;
      return a === 'leftovers'
        ? 'leftovers/ imports base/, netlink/ and proxier/ only'
        : 'live-trace/ imports base/, netlink/ and explain/ types only';
    }),
    [],
  );
});

const MODE_NAME = "'(?:nftables|ipvs|iptables|userspace)'";
/** `mode === 'ipvs'`, `'ipvs' !== mode`: asking which mode runs instead of asking its definition. */
const MODE_TEST = new RegExp(`\\bmode\\s*[!=]==?\\s*${MODE_NAME}|${MODE_NAME}\\s*[!=]==?\\s*(?:\\w+\\.)*mode\\b`);
/** A list of mode names: `['nftables', 'ipvs', ...]` or `'nftables' | 'ipvs'`. */
const MODE_LIST = new RegExp(`${MODE_NAME}\\s*[,|]\\s*${MODE_NAME}`);

test('modes are defined once: the names in proxier/types.ts, everything else in daemon/modes/', (t) => {
  const found: string[] = [];
  for (const file of files(src)) {
    const rel = relative(src, file);
    const text = readFileSync(file, 'utf8');
    // config/ reads upstream's per-mode sections of the config file (syncSection, masquerade).
    if (!rel.startsWith('config/') && !rel.startsWith('daemon/modes/') && MODE_TEST.test(text))
      found.push(`${rel}: compares the mode's name (ask its definition in daemon/modes/)`);
    if (rel !== 'proxier/types.ts' && !rel.startsWith('config/') && MODE_LIST.test(text))
      found.push(`${rel}: lists modes (PROXY_MODES in proxier/types.ts is the one list)`);
  }
  t.deepEqual(found, []);
});

test("a mode's definition imports neither the daemon's start nor another mode", (t) => {
  t.deepEqual(
    violations((e) => {
      if (!e.from.startsWith('daemon/modes/') || isPackage(e.to) || e.from === 'daemon/modes/index.ts')
        return undefined;
      if (e.to.startsWith('daemon/modes/'))
        return e.to === 'daemon/modes/types.ts' ? undefined : 'a mode imports only modes/types.ts of its siblings';
      if (['daemon/proxiers.ts', 'daemon/cleanup.ts', 'daemon/sync.ts', 'daemon/sync-loop.ts'].includes(e.to))
        return "the daemon removes other modes' leftovers and runs the syncs; a mode is asked, it does not ask";
      return undefined;
    }),
    [],
  );
});

/** Functions (declarations, methods, arrows, accessors) over `max` lines, from their first line to their last. */
function longFunctions(max: number): string[] {
  const out: string[] = [];
  for (const file of files(src)) {
    const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const visit = (n: ts.Node): void => {
      if (ts.isFunctionLike(n) && 'body' in n && n.body) {
        const first = sf.getLineAndCharacterOfPosition(n.getStart(sf)).line;
        const lines = sf.getLineAndCharacterOfPosition(n.getEnd()).line - first + 1;
        const name =
          n.name?.getText(sf) ??
          (ts.isVariableDeclaration(n.parent) || ts.isPropertyAssignment(n.parent)
            ? n.parent.name.getText(sf)
            : '(anonymous)');
        if (lines > max) out.push(`${relative(src, file)}:${first + 1} ${name}: ${lines} lines`);
      }
      ts.forEachChild(n, visit);
    };
    visit(sf);
  }
  return out;
}

test('no function in src/ is over 100 lines (split it along its seams)', (t) => {
  t.deepEqual(longFunctions(100), []);
});

/** The import cycles of src/ (type-only imports count too): groups of files that reach each other. */
function importCycles(): string[][] {
  const next = new Map<string, string[]>([...srcFiles].map((f) => [f, []]));
  for (const e of edges) if (srcFiles.has(e.to)) next.get(e.from)!.push(e.to);
  // Tarjan's strongly connected components, without recursion (src/ may grow deep chains).
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const out: string[][] = [];
  for (const start of next.keys()) {
    if (index.has(start)) continue;
    const work: [string, number][] = [[start, 0]];
    while (work.length > 0) {
      const top = work[work.length - 1]!;
      const [v, i] = top;
      if (i === 0) {
        index.set(v, index.size);
        low.set(v, index.get(v)!);
        stack.push(v);
        onStack.add(v);
      }
      const succ = next.get(v)!;
      if (i < succ.length) {
        top[1]++;
        const w = succ[i]!;
        if (!index.has(w)) work.push([w, 0]);
        else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
        continue;
      }
      work.pop();
      const parent = work[work.length - 1];
      if (parent) low.set(parent[0], Math.min(low.get(parent[0])!, low.get(v)!));
      if (low.get(v) !== index.get(v)) continue;
      const group: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        group.push(w);
      } while (w !== v);
      if (group.length > 1 || succ.includes(v)) out.push(group.sort());
    }
  }
  return out;
}

test('no import cycle anywhere in src/ (type-only imports count)', (t) => {
  t.true(srcFiles.has('netlink/core/connection.ts'), 'sanity: the reader sees src/');
  t.deepEqual(
    importCycles().map((g) => g.join(' <-> ')),
    [],
  );
});

/** Fakes for tests live in folders named fake/ (and only there). */
const isFake = (p: string): boolean => p.split('/').includes('fake');

test('no production file imports a fake; every fake lives in a fake/ folder', (t) => {
  t.true(
    edges.some((e) => isFake(e.from) && e.to === 'netlink/core/fake/index.ts'),
    'sanity: fakes are seen',
  );
  t.deepEqual(
    violations((e) =>
      !isFake(e.from) && !isPackage(e.to) && isFake(e.to) ? 'production code never imports a fake' : undefined,
    ),
    [],
  );
  t.deepEqual(
    [...srcFiles].filter((f) => /(^|\/)fake[^/]*\.ts$/i.test(f) && !isFake(f)),
    [],
    'a fake belongs in a fake/ folder',
  );
});

test('unit tests of netlink/ do not import proxier/', (t) => {
  // edgesOf names targets relative to src/, so a test's import of src/proxier reads proxier/….
  const tests = files(join(root, 'test/unit/netlink'));
  t.true(tests.length > 0, 'sanity: the netlink unit tests are seen');
  const found = tests.flatMap((f) =>
    edgesOf(f)
      .filter((e) => e.to.startsWith('proxier/'))
      .map((e) => `${relative(root, f)} -> src/${e.to}`),
  );
  t.deepEqual(found, [], 'a codec test builds its own objects; the proxier holds itself to the codec in its own tests');
});
