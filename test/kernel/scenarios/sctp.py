#!/usr/bin/python3
# SCTP for kernel tests, in the image of echo.ts: a backend that answers each association
# with "<name> <peer address>", and a client that prints the answer, ECONNREFUSED (an ABORT
# or an ICMP unreachable) or ETIMEDOUT. Node has no SCTP sockets; Python has, when the kernel
# has SCTP. IPv4 only.
#
#   sctp.py serve NAME PORT          prints "ready <mode>", serves until stdin closes
#   sctp.py connect HOST PORT [MS]   prints the answer
#
# Two modes, chosen by whether the kernel can open an SCTP socket (KPTS_SCTP_MODE=kernel|raw
# forces one):
#
# - kernel: real SCTP sockets (one-to-one style); the answer is sent as data after the
#   four-way handshake.
# - raw: kernels built without SCTP (CONFIG_IP_SCTP off, as on this project's machines)
#   still track and NAT SCTP (nf_conntrack_proto_sctp). The client sends a hand-made INIT
#   through a raw IP socket; the backend, on a raw socket for protocol 132, answers with an
#   INIT-ACK whose State Cookie holds "<name> <peer address>". These are real SCTP packets
#   with valid CRC32c checksums and verification tags, so conntrack tracks them, the proxy's
#   DNAT applies to the INIT and its reverse to the INIT-ACK. The client accepts an INIT-ACK
#   only from the address it sent to, so an answer also proves the reply was un-NATed.
#   (A raw socket for the protocol also keeps the kernel from answering "protocol
#   unreachable".)
#
# Both modes were checked through nft DNAT + masquerade, a reject and a drop on Debian's 6.1
# kernel under QEMU (sctp.ko loaded, resp. not), and raw mode on this project's 6.18.
import os
import random
import select
import socket
import struct
import sys
import time

IPPROTO_SCTP = 132
INIT, INIT_ACK, ABORT = 1, 2, 6
STATE_COOKIE = 7


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC_TABLE = _crc32c_table()


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def chunk(ctype, value):
    length = 4 + len(value)
    return struct.pack('!BBH', ctype, 0, length) + value + b'\0' * (-length % 4)


def packet(sport, dport, vtag, chunks):
    """Common header + chunks; the CRC32c goes in little-endian, as the kernel writes it (RFC 9260 App. A)."""
    body = b''.join(chunks)
    crc = crc32c(struct.pack('!HHII', sport, dport, vtag, 0) + body)
    return struct.pack('!HHI', sport, dport, vtag) + struct.pack('<I', crc) + body


def init_fields(tag):
    # initiate tag, a_rwnd, outbound streams, inbound streams, initial TSN
    return struct.pack('!IIHHI', tag, 65536, 1, 1, random.randint(1, 2**32 - 1))


def parse(data):
    """An IPv4 datagram from a raw socket: (sport, dport, vtag, chunk type, chunk value) or None."""
    ihl = (data[0] & 0x0F) * 4
    sctp = data[ihl:]
    if len(sctp) < 16:
        return None
    sport, dport, vtag = struct.unpack('!HHI', sctp[:8])
    ctype, _flags, length = struct.unpack('!BBH', sctp[12:16])
    return sport, dport, vtag, ctype, sctp[16:12 + length]


def kernel_has_sctp():
    forced = os.environ.get('KPTS_SCTP_MODE')
    if forced:
        return forced == 'kernel'
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP).close()
        return True
    except OSError:
        return False


def stdin_closed():
    return os.read(0, 4096) == b''


def serve(name, port):
    kernel = kernel_has_sctp()
    if kernel:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('0.0.0.0', port))
        s.listen(64)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_SCTP)
    print('ready', 'kernel' if kernel else 'raw', flush=True)
    while True:
        ready, _, _ = select.select([s, sys.stdin], [], [])
        if sys.stdin in ready and stdin_closed():
            return
        if s not in ready:
            continue
        if kernel:
            c, (peer, _) = s.accept()
            try:
                c.sendall(f'{name} {peer}'.encode())
            except OSError:
                pass
            c.close()
            continue
        data, (src, _) = s.recvfrom(65535)
        p = parse(data)
        if not p:
            continue
        sport, dport, vtag, ctype, value = p
        if dport != port or ctype != INIT or vtag != 0 or len(value) < 16:
            continue
        (peer_tag,) = struct.unpack('!I', value[:4])
        cookie = f'{name} {src}'.encode()
        param = struct.pack('!HH', STATE_COOKIE, 4 + len(cookie)) + cookie + b'\0' * (-len(cookie) % 4)
        ack = chunk(INIT_ACK, init_fields(random.randint(1, 2**32 - 1)) + param)
        s.sendto(packet(port, sport, peer_tag, [ack]), (src, 0))


def connect_kernel(host, port, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, IPPROTO_SCTP)
    # A reject (ICMP unreachable) ends connect() only with IP_RECVERR (linux/in.h: 11), and
    # only when it answers an INIT sent while the socket is not locked: the first INIT goes
    # out from connect() itself, whose lock the kernel often still holds when the ICMP comes
    # back (LockDroppedIcmps). So retransmit the INIT soon: SCTP_RTOINFO (linux/sctp.h: 0),
    # struct sctp_rtoinfo { assoc_id, initial, max, min } in ms (the default initial is 3 s).
    s.setsockopt(socket.IPPROTO_IP, 11, 1)
    s.setsockopt(IPPROTO_SCTP, 0, struct.pack('=iIII', 0, 100, 400, 50))
    s.settimeout(timeout)
    try:
        s.connect((host, port))
        out = b''
        while True:
            d = s.recv(4096)
            if not d:
                break
            out += d
        return out.decode()
    except ConnectionRefusedError:
        return 'ECONNREFUSED'
    except (socket.timeout, TimeoutError):
        return 'ETIMEDOUT'
    except OSError as e:
        return 'ECONNREFUSED' if e.errno in (111, 113) else f'ERROR {e}'
    finally:
        s.close()


def cookie_of(value):
    params = value[16:]
    while len(params) >= 4:
        ptype, plen = struct.unpack('!HH', params[:4])
        if plen < 4:
            break
        if ptype == STATE_COOKIE:
            return params[4:plen].decode(errors='replace')
        params = params[plen + (-plen % 4):]
    return 'NO-COOKIE'


def connect_raw(host, port, timeout):
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, IPPROTO_SCTP)
    icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    sport = random.randint(20000, 60000)
    tag = random.randint(1, 2**32 - 1)
    s.sendto(packet(sport, port, 0, [chunk(INIT, init_fields(tag))]), (host, 0))
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return 'ETIMEDOUT'
        ready, _, _ = select.select([s, icmp], [], [], left)
        if icmp in ready:
            data, _ = icmp.recvfrom(65535)
            ihl = (data[0] & 0x0F) * 4
            icmp_type = data[ihl]
            inner = data[ihl + 8:]
            if icmp_type == 3 and len(inner) >= 24 and inner[9] == IPPROTO_SCTP:
                inner_ihl = (inner[0] & 0x0F) * 4
                if struct.unpack('!HH', inner[inner_ihl:inner_ihl + 4]) == (sport, port):
                    return 'ECONNREFUSED'
        if s in ready:
            data, (src, _) = s.recvfrom(65535)
            p = parse(data)
            if not p:
                continue
            rsport, rdport, vtag, ctype, value = p
            if (rsport, rdport, vtag) != (port, sport, tag):
                continue
            if ctype == ABORT:
                return 'ECONNREFUSED'
            if ctype == INIT_ACK:
                answer = cookie_of(value)
                return answer if src == host else f'FROM {src}: {answer}'


def main():
    cmd = sys.argv[1] if len(sys.argv) > 1 else ''
    if cmd == 'serve' and len(sys.argv) == 4:
        serve(sys.argv[2], int(sys.argv[3]))
    elif cmd == 'connect' and len(sys.argv) in (4, 5):
        timeout = (int(sys.argv[4]) if len(sys.argv) == 5 else 1500) / 1000
        host, port = sys.argv[2], int(sys.argv[3])
        print(connect_kernel(host, port, timeout) if kernel_has_sctp() else connect_raw(host, port, timeout))
    else:
        sys.exit('usage: sctp.py serve NAME PORT | connect HOST PORT [TIMEOUT_MS]')


if __name__ == '__main__':
    main()
