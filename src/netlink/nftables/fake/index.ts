// The in-memory nf_tables fake for tests (never imported by production code).
export { FakeNft } from './nft.ts';
