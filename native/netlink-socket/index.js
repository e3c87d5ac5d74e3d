'use strict';
// Loads the addon node-gyp built (build/Release), the only place `npm ci` puts it.
module.exports = require('./build/Release/netlink_socket.node');
