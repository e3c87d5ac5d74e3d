// Verifies that the pinned Node 24 runtime and the native addons it needs are usable, and with
// --test that the test lab's npm tools are installed (`scripts/setup.sh --test`).
// Run by scripts/setup.sh and at the start of `npm test`.
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const require = createRequire(import.meta.url);
const problems: string[] = [];
const major = Number(process.versions.node.split('.')[0]);
if (major !== 24)
  problems.push(`running on Node ${process.version}, expected the pinned Node 24 (node_modules/.bin/node)`);
for (const addon of ['netlink-socket', 'sd-notify']) {
  try {
    const mod = require(addon) as Record<string, unknown>;
    // A build from before getrlimit/setrlimit were added loads, and the daemon then fails at start;
    // one without mallocTrim runs, but never gives malloc's arenas back after a collection.
    for (const fn of addon === 'netlink-socket' ? ['getrlimit', 'mallocTrim'] : [])
      if (typeof mod[fn] !== 'function')
        problems.push(`native addon netlink-socket is an old build (no ${fn}): rebuild it`);
  } catch (err) {
    problems.push(`native addon ${addon} does not load: ${(err as Error).message.split('\n')[0]}`);
  }
}
const testLab = process.argv.includes('--test');
if (testLab) {
  for (const tool of ['ava', 'typescript', 'eslint', 'prettier']) {
    if (!existsSync(join(import.meta.dirname, '../node_modules', tool, 'package.json')))
      problems.push(`${tool} is not installed (the test lab's npm tools)`);
  }
}
if (problems.length > 0) {
  for (const p of problems) console.error(`check-runtime: ${p}`);
  console.error(`check-runtime: run bash scripts/setup.sh${testLab ? ' --test' : ''} to (re)install dependencies`);
  process.exit(1);
}
console.log(`check-runtime: Node ${process.version}, netlink-socket and sd-notify load`);
