// The function-backed fake kernel for tests (never imported by production code): a RawSocket
// whose replies come from a function, and the reply builders fakes use.
export { ackReply, doneReply, errorReply, extAckErrorReply, FakeKernel } from './kernel.ts';
export type { FakeHandler, FakeReply } from './kernel.ts';
