#!/bin/sh
# Wires two network namespaces to the VM's root namespace (the node, where kube-proxy-ts
# programs its rules), for the systemd boot test's Service traffic. Runs inside the VM only.
#
#   kpts-client  eth0 192.168.77.2/24 ---- kpts-vcli 192.168.77.1/24 ┐
#                default via .1                                      ├ node (root ns,
#   kpts-pod     eth0 10.244.1.10/24  ---- kpts-vpod 10.244.1.1/24   ┘  forwarding on)
#                default via .1
#
# The pod's address is the echo Service's endpoint (the test's manifest); a client packet to
# the ClusterIP reaches the node, which DNATs it to the pod only if the rules are in place
# (the node has no other route to 10.96.0.0/12).
set -eu
link() { # link NS HOST_IF HOST_ADDR NS_ADDR
  ip netns add "$1"
  ip link add "$2" type veth peer name eth0 netns "$1"
  ip addr add "$3/24" dev "$2"
  ip link set "$2" up
  ip -n "$1" link set lo up
  ip -n "$1" addr add "$4/24" dev eth0
  ip -n "$1" link set eth0 up
  ip -n "$1" route add default via "$3"
}
link kpts-pod kpts-vpod 10.244.1.1 10.244.1.10
link kpts-client kpts-vcli 192.168.77.1 192.168.77.2
echo 1 >/proc/sys/net/ipv4/ip_forward
ip -br addr
ip netns list
