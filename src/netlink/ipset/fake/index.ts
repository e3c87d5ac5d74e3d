// The in-memory ipset fake for tests (never imported by production code).
export { FakeIpsetKernel, fakeIpset } from './kernel.ts';
