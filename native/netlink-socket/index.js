// The addon node-gyp built: `npm ci` runs `node-gyp rebuild` here (package.json "install").
import { createRequire } from 'node:module';

export const { NetlinkSocket, RLIMIT_NOFILE, getrlimit, setrlimit, mallocTrim } = createRequire(import.meta.url)(
  './build/Release/netlink_socket.node',
);
