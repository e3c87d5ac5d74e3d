#!/usr/bin/env node
// The package's entry point: Node 24 runs the TypeScript sources directly (type stripping),
// so this launcher only hands the command line to the daemon's main(). Installed packages
// start it through /usr/bin/kube-proxy-ts, which execs the bundled Node 24. From a checkout,
// scripts/setup.sh puts Node 24 in node_modules/node/bin/node (`npx kube-proxy-ts` finds it).
// Written for any Node: an older one gets one line saying which Node to use, before it
// tries to load a .ts file it cannot read.

const NEEDED = { major: 24, minor: 12 }; // package.json "engines"
const [major, minor] = process.versions.node.split('.').map(Number);
if (major !== NEEDED.major || minor < NEEDED.minor || !process.features.typescript) {
  const bundled = new URL('../node_modules/node/bin/node', import.meta.url).pathname;
  process.stderr.write(
    `kube-proxy-ts: needs Node ${NEEDED.major}.${NEEDED.minor} or a later ${NEEDED.major}.x, not v${process.versions.node} ` +
      `(${process.execPath}); scripts/setup.sh installs it as ${bundled}: run \`npx kube-proxy-ts\` ` +
      `or \`${bundled} bin/kube-proxy-ts.js\`\n`,
  );
  process.exit(1);
}

const { main } = await import('../src/daemon/main.ts');
const code = await main(process.argv.slice(2));
if (typeof code === 'number') process.exitCode = code;
