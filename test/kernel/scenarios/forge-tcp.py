#!/usr/bin/python3
# Sends hand-made TCP segments that belong to no connection, for conntrack to judge INVALID:
# a FIN (with ACK) opens no connection, so conntrack's TCP tracker refuses it ("invalid new")
# even with nf_conntrack_tcp_loose, which would pick up a bare ACK as ESTABLISHED. Node has no
# raw sockets; Python has. IPv4 only; valid TCP checksums, so only the state makes them INVALID.
#
#   forge-tcp.py SRC DST DPORT COUNT   prints "sent COUNT"
import socket
import struct
import sys


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def segment(src: str, dst: str, sport: int, dport: int, seq: int) -> bytes:
    fin_ack = 0x11
    header = struct.pack("!HHIIBBHHH", sport, dport, seq, 1, 5 << 4, fin_ack, 64240, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(header))
    csum = checksum(pseudo + header)
    return header[:16] + struct.pack("!H", csum) + header[18:]


def main() -> None:
    src, dst, dport, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
    for i in range(count):
        s.sendto(segment(src, dst, 40000 + i, dport, 1000 + i), (dst, 0))
    print(f"sent {count}")


main()
