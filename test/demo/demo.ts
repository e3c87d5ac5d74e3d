// `npm run demo`. Until the nftables proxier lands this shows the netlink core at work: in a
// throwaway network namespace it creates an nf_tables table and chain in one batch, lists
// them back over netlink, shows what `nft` sees, provokes a typed error, and cleans up.
import { Netns } from '../helpers/netns.ts';

const scenario = new URL('../kernel/scenarios/core-nft.ts', import.meta.url).href;

const ns = await Netns.create('demo');
const cleanup = async (): Promise<void> => {
  await ns.destroy();
};
process.once('SIGINT', () => void cleanup().then(() => process.exit(130)));
try {
  console.log(`namespace ${ns.name} created`);
  const agent = await ns.agent();
  console.log('1. one nfnetlink batch: add table ip kube-proxy-ts-demo + chain services');
  await agent.call(scenario, 'createTableAndChain', 'kube-proxy-ts-demo', 'services');
  console.log('2. dumped back over netlink:', JSON.stringify(await agent.call(scenario, 'dumpNames')));
  console.log('3. what nft sees:\n' + (await ns.run('nft', 'list', 'ruleset')));
  console.log('4. the same table again with NLM_F_EXCL gives a typed error:', JSON.stringify(await agent.call(scenario, 'createTableExclusive', 'kube-proxy-ts-demo')));
} finally {
  await cleanup();
  console.log(`namespace ${ns.name} removed`);
}
