// The in-memory rtnetlink fake for tests (never imported by production code).
export { FakeRouteKernel, fakeRoute } from './kernel.ts';
export type { FakeRouteOptions } from './kernel.ts';
