// Service traffic for the systemd boot test, run inside the VM by payload.sh with the
// packaged Node (plain JavaScript: nothing to strip, so it starts fast under emulation).
//
//   node traffic.mjs serve NAME PORT
//     A line echo backend: answers every line received with "NAME PEER LINE", on as many
//     connections as come, until killed.
//   node traffic.mjs client HOST PORT  <commands  >answers
//     Keeps ONE connection to HOST:PORT open for its whole life (connected at start) and
//     obeys one command per input line, printing one answer line for each:
//       send WORD   ->  "send WORD <reply>"   the reply on the held connection
//       probe WORD  ->  "probe WORD <reply>"  the reply on a fresh connection, closed after
//     <reply> is the backend's answer, or an error code (ETIMEDOUT, ECONNREFUSED, ...).
//     The first line printed is "connected <local port>" (or "connect-failed <code>"); if
//     the held connection ever closes or fails, "held-closed <code>" is printed when it does.
//     Ends at the end of its input.

import { createServer, connect } from 'node:net';
import { createInterface } from 'node:readline';

/** Emulation on loaded shared cores is slow: a reply may take seconds, not milliseconds. */
const REPLY_TIMEOUT_MS = 15_000;

const peer = (a) => (a ?? '?').replace(/^::ffff:/, '');
const say = (line) => process.stdout.write(`${line}\n`);

function serve(name, port) {
  const srv = createServer((c) => {
    c.setEncoding('utf8');
    let buf = '';
    c.on('data', (d) => {
      buf += d;
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        c.write(`${name} ${peer(c.remoteAddress)} ${line}\n`);
      }
    });
    c.on('error', () => {});
  });
  srv.listen(Number(port), '0.0.0.0', () => say(`listening ${port}`));
}

/** Reads replies line by line from a socket; next() waits for the following one. */
function lineReader(sock) {
  const lines = [];
  const waiters = [];
  let buf = '';
  let ended;
  sock.setEncoding('utf8');
  sock.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i);
      buf = buf.slice(i + 1);
      const w = waiters.shift();
      if (w) w(line);
      else lines.push(line);
    }
  });
  const finish = (code) => {
    if (ended) return;
    ended = code;
    for (const w of waiters.splice(0)) w(code);
  };
  sock.on('error', (e) => finish(e.code ?? 'ERROR'));
  sock.on('close', () => finish('ECLOSED'));
  return {
    next() {
      if (lines.length > 0) return Promise.resolve(lines.shift());
      if (ended) return Promise.resolve(ended);
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(done), 1);
          resolve('ETIMEDOUT');
        }, REPLY_TIMEOUT_MS);
        const done = (line) => {
          clearTimeout(timer);
          resolve(line);
        };
        waiters.push(done);
      });
    },
  };
}

/** Connects; resolves with the socket, or with an error code. */
function open(host, port) {
  return new Promise((resolve) => {
    const s = connect({ host, port: Number(port) });
    const timer = setTimeout(() => {
      s.destroy();
      resolve('ETIMEDOUT');
    }, REPLY_TIMEOUT_MS);
    s.once('connect', () => {
      clearTimeout(timer);
      resolve(s);
    });
    s.once('error', (e) => {
      clearTimeout(timer);
      resolve(e.code ?? 'ERROR');
    });
  });
}

async function probe(host, port, word) {
  const s = await open(host, port);
  if (typeof s === 'string') return s;
  const replies = lineReader(s);
  s.write(`${word}\n`);
  const reply = await replies.next();
  s.destroy();
  return reply;
}

async function client(host, port) {
  const held = await open(host, port);
  if (typeof held === 'string') say(`connect-failed ${held}`);
  else {
    say(`connected ${held.localPort}`);
    held.on('error', (e) => say(`held-closed ${e.code ?? 'ERROR'}`));
    held.on('end', () => say('held-closed EOF'));
  }
  const replies = typeof held === 'string' ? undefined : lineReader(held);
  // One command at a time, in order: the shell waits for each answer before the next step.
  for await (const line of createInterface({ input: process.stdin })) {
    const [cmd, word = ''] = line.trim().split(/\s+/);
    if (cmd === 'send') {
      if (!replies) say(`send ${word} ENOTCONN`);
      else {
        held.write(`${word}\n`);
        say(`send ${word} ${await replies.next()}`);
      }
    } else if (cmd === 'probe') say(`probe ${word} ${await probe(host, port, word)}`);
    else if (cmd) say(`${cmd} EBADCMD`);
  }
  if (typeof held !== 'string') held.destroy();
}

const [mode, ...args] = process.argv.slice(2);
if (mode === 'serve') serve(args[0], args[1]);
else if (mode === 'client') await client(args[0], args[1]);
else {
  process.stderr.write('usage: traffic.mjs serve NAME PORT | client HOST PORT\n');
  process.exitCode = 2;
}
