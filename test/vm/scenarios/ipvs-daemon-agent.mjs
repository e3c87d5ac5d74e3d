// Helper processes for the IPVS daemon VM scenario (ipvs-daemon.ts), started inside network
// namespaces with `ip netns exec`. Plain JavaScript: each start under emulation is cheaper
// without type stripping.
//
//   server ADDR...  per address (IPv4 or IPv6): TCP 8080 answers "<local> <peer>" and closes;
//                   TCP 8081 says the same, then echoes lines and stays open; UDP 5353 answers
//                   "<addr> <peer>" from a socket bound to that address (so IPVS sees the reply
//                   come from the real server it chose). Prints "ready".
//   agent           JSON requests on stdin, JSON replies on stdout (one line each):
//     {id, op:'tcp'|'udp', host, port, n, from?}  -> {id, answers:[...]} or {id, error, code}
//                                                    (from: the local address to send from)
//     {id, op:'open', host, port}                 -> {id, answer} (connection kept as id)
//     {id, op:'send', conn, data}                 -> {id, answer}
//     {id, op:'close', conn}                      -> {id}
//     {id, op:'flow', host, port, localPort, everyMs}
//                                                 -> {id} (a UDP flow from ONE source port: a
//                                                    datagram every everyMs, answers recorded)
//     {id, op:'flowlog', flow}                    -> {id, sent, answers:[{t, answer}]} (since start)
//     {id, op:'flowstop', flow}                   -> {id} (stops sending; the log stays readable)
//     {id, op:'http', url, from?}                 -> {id, status, type, headers, body}
import net from 'node:net';
import dgram from 'node:dgram';
import http from 'node:http';
import readline from 'node:readline';

const [mode, ...args] = process.argv.slice(2);
const isV6 = (a) => a.includes(':');

if (mode === 'server') {
  let pending = 0;
  const up = () => {
    if (--pending === 0) console.log('ready');
  };
  for (const addr of args) {
    pending += 3;
    net.createServer((s) => s.end(`${s.localAddress} ${s.remoteAddress}\n`)).listen(8080, addr, up);
    net
      .createServer((s) => {
        s.write(`${s.localAddress} ${s.remoteAddress}\n`);
        s.on('data', (d) => s.write(d));
        s.on('error', () => {});
      })
      .listen(8081, addr, up);
    const u = dgram.createSocket(isV6(addr) ? 'udp6' : 'udp4');
    u.on('message', (_m, r) => u.send(`${addr} ${r.address}`, r.port, r.address));
    u.bind(5353, addr, up);
  }
} else if (mode === 'agent') {
  const conns = new Map();
  const flows = new Map();
  const reply = (o) => process.stdout.write(JSON.stringify(o) + '\n');
  const tcpOnce = (host, port, from) =>
    new Promise((res, rej) => {
      const s = net.connect({ port, host, ...(from ? { localAddress: from } : {}) });
      let d = '';
      s.setTimeout(4000, () => s.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
      s.on('data', (c) => (d += c));
      s.on('end', () => res(d.trim()));
      s.on('error', rej);
    });
  const udpOnce = (host, port, from) =>
    new Promise((res, rej) => {
      const u = dgram.createSocket(isV6(host) ? 'udp6' : 'udp4');
      if (from) u.bind(0, from);
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
  const httpGet = (url, from) =>
    new Promise((res, rej) => {
      const req = http.get(url, { timeout: 5000, ...(from ? { localAddress: from } : {}) }, (r) => {
        let body = '';
        r.setEncoding('utf8');
        r.on('data', (c) => (body += c));
        r.on('end', () =>
          res({ status: r.statusCode, type: String(r.headers['content-type'] ?? ''), headers: r.headers, body }),
        );
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'ETIMEDOUT' })));
      req.on('error', rej);
    });
  const handle = async (q) => {
    try {
      if (q.op === 'tcp' || q.op === 'udp') {
        const answers = [];
        for (let i = 0; i < (q.n ?? 1); i++)
          answers.push(await (q.op === 'tcp' ? tcpOnce : udpOnce)(q.host, q.port, q.from));
        return reply({ id: q.id, answers });
      }
      if (q.op === 'open') {
        const s = net.connect(q.port, q.host);
        s.setEncoding('utf8');
        const first = await new Promise((res, rej) => {
          const t = setTimeout(() => rej(Object.assign(new Error('no greeting'), { code: 'ETIMEDOUT' })), 4000);
          s.once('data', (d) => {
            clearTimeout(t);
            res(d);
          });
          s.once('error', rej);
        });
        s.on('error', () => {});
        conns.set(q.id, s);
        return reply({ id: q.id, answer: first.trim(), localPort: s.localPort });
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
      if (q.op === 'close') {
        conns.get(q.conn)?.destroy();
        conns.delete(q.conn);
        return reply({ id: q.id });
      }
      if (q.op === 'flow') {
        const u = dgram.createSocket(isV6(q.host) ? 'udp6' : 'udp4');
        const f = { u, sent: 0, answers: [], timer: undefined, stopped: false };
        u.on('message', (m) => f.answers.push({ t: Date.now(), answer: String(m) }));
        u.on('error', () => {});
        await new Promise((res, rej) => {
          u.once('error', rej);
          u.bind(q.localPort, res);
        });
        const send = () => {
          f.sent++;
          u.send(`flow ${f.sent}`, q.port, q.host);
        };
        send();
        f.timer = setInterval(send, q.everyMs ?? 200);
        flows.set(q.id, f);
        return reply({ id: q.id });
      }
      if (q.op === 'flowlog') {
        const f = flows.get(q.flow);
        return reply({ id: q.id, sent: f.sent, answers: f.answers });
      }
      if (q.op === 'flowstop') {
        const f = flows.get(q.flow);
        if (f && !f.stopped) {
          f.stopped = true;
          clearInterval(f.timer);
          f.u.close();
        }
        return reply({ id: q.id });
      }
      if (q.op === 'http') return reply({ id: q.id, ...(await httpGet(q.url, q.from)) });
      reply({ id: q.id, error: `unknown op ${q.op}` });
    } catch (e) {
      reply({ id: q.id, error: String(e && e.message), code: e && e.code });
    }
  };
  readline.createInterface({ input: process.stdin }).on('line', (l) => void handle(JSON.parse(l)));
  console.log(JSON.stringify({ ready: true }));
}
