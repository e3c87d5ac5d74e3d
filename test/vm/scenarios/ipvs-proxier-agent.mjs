// Helper processes for the IPVS proxier VM scenario, started inside network namespaces with
// `ip netns exec`:
//   server ADDR...  per address: TCP 8080 answers "<local> <peer>" and closes; TCP 8081 says
//                   the same, then echoes lines and stays open; UDP 5353 answers "<local> <peer>"
//                   from a socket bound to that address (so IPVS sees the reply come from the
//                   real server it chose). Prints "ready".
//   client          JSON requests on stdin, JSON replies on stdout (one line each):
//                   {id, op:'tcp'|'udp', host, port, n}       -> {id, answers:[...]} or {id, error}
//                                                  (tcp: `local` binds the source address)
//                   {id, op:'open', host, port}               -> {id, answer} (connection kept as id)
//                   {id, op:'send', conn, data}               -> {id, answer}
//                   {id, op:'reset', conn}                    -> {id} (RST: IPVS state CLOSE)
import net from 'node:net';
import dgram from 'node:dgram';
import readline from 'node:readline';

const [mode, ...args] = process.argv.slice(2);

if (mode === 'server') {
  let pending = 0;
  const up = () => {
    if (--pending === 0) console.log('ready');
  };
  for (const addr of args) {
    pending += 3;
    // A client that gave up (its 4 s time-out on a loaded VM) resets the connection: not fatal.
    net
      .createServer((s) => {
        s.on('error', () => {});
        s.end(`${s.localAddress} ${s.remoteAddress}\n`);
      })
      .listen(8080, addr, up);
    net
      .createServer((s) => {
        s.write(`${s.localAddress} ${s.remoteAddress}\n`);
        s.on('data', (d) => s.write(d));
        s.on('error', () => {});
      })
      .listen(8081, addr, up);
    const u = dgram.createSocket('udp4');
    u.on('message', (_m, r) => u.send(`${addr} ${r.address}`, r.port, r.address));
    u.bind(5353, addr, up);
  }
} else if (mode === 'client') {
  const conns = new Map();
  const reply = (o) => process.stdout.write(JSON.stringify(o) + '\n');
  const tcpOnce = (host, port, localAddress) =>
    new Promise((res, rej) => {
      const s = net.connect({ port, host, ...(localAddress ? { localAddress } : {}) });
      let d = '';
      s.setTimeout(4000, () => s.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
      s.on('data', (c) => (d += c));
      s.on('end', () => res(d.trim()));
      s.on('error', rej);
    });
  const udpOnce = (host, port) =>
    new Promise((res, rej) => {
      const u = dgram.createSocket('udp4');
      const t = setTimeout(() => {
        u.close();
        rej(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' }));
      }, 4000);
      u.on('message', (m) => {
        clearTimeout(t);
        u.close();
        res(String(m));
      });
      u.send('q', port, host);
    });
  const handle = async (q) => {
    try {
      if (q.op === 'tcp' || q.op === 'udp') {
        const answers = [];
        for (let i = 0; i < (q.n ?? 1); i++)
          answers.push(await (q.op === 'tcp' ? tcpOnce : udpOnce)(q.host, q.port, q.local));
        return reply({ id: q.id, answers });
      }
      if (q.op === 'open') {
        const s = net.connect(q.port, q.host);
        s.setEncoding('utf8');
        const first = await new Promise((res, rej) => {
          s.once('data', res);
          s.once('error', rej);
        });
        s.on('error', () => {});
        conns.set(q.id, s);
        return reply({ id: q.id, answer: first.trim() });
      }
      if (q.op === 'send') {
        const s = conns.get(q.conn);
        const answer = await new Promise((res, rej) => {
          const t = setTimeout(() => rej(Object.assign(new Error('no echo'), { code: 'ETIMEDOUT' })), 4000);
          s.once('data', (d) => {
            clearTimeout(t);
            res(d.trim());
          });
          s.write(q.data + '\n');
        });
        return reply({ id: q.id, answer });
      }
      if (q.op === 'reset') {
        conns.get(q.conn)?.resetAndDestroy();
        conns.delete(q.conn);
        return reply({ id: q.id });
      }
      reply({ id: q.id, error: `unknown op ${q.op}` });
    } catch (e) {
      reply({ id: q.id, error: String(e && e.message), code: e && e.code });
    }
  };
  readline.createInterface({ input: process.stdin }).on('line', (l) => void handle(JSON.parse(l)));
  console.log(JSON.stringify({ ready: true }));
}
