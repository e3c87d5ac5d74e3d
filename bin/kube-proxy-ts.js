#!/usr/bin/env node
// The package's entry point: Node 24 runs the TypeScript sources directly (type stripping),
// so this launcher only hands the command line to the daemon's main(). Installed packages
// start it through /usr/bin/kube-proxy-ts, which execs the bundled Node 24.
import { main } from '../src/daemon/main.ts';

const code = await main(process.argv.slice(2));
if (typeof code === 'number') process.exitCode = code;
