#!/bin/sh
# Runs inside the VM as a oneshot unit, once systemd (PID 1) reached multi-user.target.
# It only collects: every step's output and exit status go to /kpts/out/<step>.{txt,rc},
# and test/vm/systemd-boot.test.ts makes the assertions on the host after power-off.
set -u
O=/kpts/out
mkdir -p "$O"
export SYSTEMD_PAGER='' SYSTEMD_COLORS=0 LANG=C.UTF-8
# Should the traffic client die, writing to its FIFO must fail, not kill this script.
trap '' PIPE
# run NAME CMD...: bounded (no step may hang the boot; STEP_TIMEOUT, default 120 s),
# output and status recorded.
run() {
  name=$1
  shift
  echo "$(cut -d' ' -f1 /proc/uptime) $name" >>"$O/steps"
  timeout "${STEP_TIMEOUT:-120}" "$@" >"$O/$name.txt" 2>&1
  echo $? >"$O/$name.rc"
}

run uname uname -r
run systemd-version systemctl --version
run nft-before nft list tables

# Install: enable on install, start attempted at once (debhelper's postinst).
# Unpacking ~155 MB from xz under software emulation on shared cores takes minutes.
STEP_TIMEOUT=420 run dpkg-install dpkg --force-unsafe-io -i /kpts/kube-proxy-ts.deb
run dpkg-L dpkg -L kube-proxy-ts
run dpkg-conffiles dpkg-query -W -f='${Conffiles}\n' kube-proxy-ts
run is-enabled systemctl is-enabled kube-proxy-ts
run show-installed systemctl show kube-proxy-ts -p LoadState,UnitFileState,FragmentPath,ActiveState,SubState,NRestarts
run version /usr/bin/kube-proxy-ts --version
run man-page test -s /usr/share/man/man8/kube-proxy-ts.8.gz
run docs sh -c 'cd /usr/share/doc/kube-proxy-ts && find . -type f | sort'
run etc-mode stat -c '%a %U %G' /etc/kube-proxy-ts

# A fresh install has no kubeconfig: the postinst's start is skipped on the unit's condition
# (no daemon started, none failing every RestartSec), and status says what is missing. Wait
# past two RestartSec periods, so that a restart loop would show.
sleep 12
run show-fresh systemctl show kube-proxy-ts -p ActiveState,SubState,NRestarts,ConditionResult,ExecMainStartTimestampMonotonic,Result
run status-fresh systemctl status --no-pager --full kube-proxy-ts

# The real main once it is wired; until then the stand-in (see standin-main.js) replaces
# the installed placeholder, so the packaged launch chain runs unchanged.
# (Had the postinst's start gone ahead, stopping it here keeps the start below from joining a
# start job already under way with the old environment.)
systemctl stop kube-proxy-ts
if grep -q 'PLACEHOLDER' /usr/lib/kube-proxy-ts/src/daemon/main.ts; then
  echo standin >"$O/mode"
  cp /kpts/standin-main.js /usr/lib/kube-proxy-ts/src/daemon/main.ts
else
  echo real >"$O/mode"
fi
# Standalone source: the manifests the host put in /kpts/manifests; extra flags through the
# packaged environment file, as an operator would.
echo 'KUBE_PROXY_TS_ARGS="--manifest-dir=/kpts/manifests --hostname-override=kpts-vm"' >/etc/default/kube-proxy-ts
# Configured as the man page says: the kubeconfig the packaged config.yaml names, 0600. (This VM
# has no API server: the manifest directory above is the source, and the kubeconfig is what
# lets the unit start.)
(umask 077 && cat >/etc/kube-proxy-ts/kubeconfig <<'KUBECONFIG'
apiVersion: v1
kind: Config
clusters: [{ name: vm, cluster: { server: "https://127.0.0.1:6443" } }]
users: [{ name: kube-proxy, user: { token: kpts-vm } }]
contexts: [{ name: vm, context: { cluster: vm, user: kube-proxy } }]
current-context: vm
KUBECONFIG
)
# Emulation without KVM on shared cores runs Node ~50x slower than a node would: give the
# start (READY after the first full sync) and stop the time that needs. Test-only drop-in.
mkdir -p /etc/systemd/system/kube-proxy-ts.service.d
printf '[Service]\nTimeoutStartSec=600\nTimeoutStopSec=180\n' >/etc/systemd/system/kube-proxy-ts.service.d/zz-vm-slow.conf
systemctl daemon-reload
systemctl reset-failed kube-proxy-ts 2>/dev/null
journalctl --rotate >/dev/null 2>&1
date -u '+%Y-%m-%d %H:%M:%S' >"$O/since"

# Service traffic: a backend "pod" and a client in namespaces wired to this (node) namespace
# (topology.sh); the backend is the echo Service's endpoint 10.244.1.10:8080.
NODE=/usr/lib/kube-proxy-ts/node_modules/node/bin/node
run topology sh /kpts/topology.sh
ip netns exec kpts-pod "$NODE" /kpts/traffic.mjs serve pod-a 8080 >"$O/backend.txt" 2>&1 &
backend=$!

# wait_for FILE PATTERN: until a line of FILE matches, for 60 s at most.
wait_for() {
  n=0
  until grep -q "$2" "$1" 2>/dev/null || [ $n -ge 120 ]; do sleep 0.5; n=$((n + 1)); done
}
# ask CMD WORD: one command to the traffic client (traffic.mjs), then its answer line
# "CMD WORD <reply>" in client.txt (the client gives up on a reply after 15 s).
ask() {
  echo "$(cut -d' ' -f1 /proc/uptime) client $1 $2" >>"$O/steps"
  echo "$1 $2" >&3
  wait_for "$O/client.txt" "^$1 $2 "
}

# Type=notify: `systemctl start` returns once READY=1 arrived (or the start failed).
STEP_TIMEOUT=620 run start systemctl start kube-proxy-ts
sleep 3
run show-started systemctl show kube-proxy-ts -p ActiveState,SubState,MainPID,StatusText,NRestarts,WatchdogUSec,WatchdogTimestampMonotonic,Result
run status systemctl status --no-pager --full --lines=50 kube-proxy-ts
# One process: the launcher exec()ed the bundled Node, which systemd knows as the main PID.
run main-exe sh -c 'readlink /proc/$(systemctl show -p MainPID --value kube-proxy-ts)/exe'
# The operator's command on the host, against the running daemon's control socket.
STEP_TIMEOUT=300 run explain /usr/bin/kube-proxy-ts explain
STEP_TIMEOUT=300 run explain-echo /usr/bin/kube-proxy-ts explain default/echo
run nft-running nft list tables
run ruleset-running nft list ruleset

# No mid-stream pickup by conntrack (the kernel's default picks one up): should a restart
# lose the held connection's conntrack entry, its next packet is then not translated again
# through the rules and the connection breaks, instead of silently surviving on one endpoint.
# (nf_conntrack is loaded once the daemon programmed its NAT rules.)
run conntrack-strict sh -c 'echo 0 >/proc/sys/net/netfilter/nf_conntrack_tcp_loose'
# The backend (started before the daemon) must listen before the first probe.
wait_for "$O/backend.txt" '^listening '
# The client holds ONE connection through the ClusterIP from before the restart to after the
# stop, and opens fresh ones ("probe") at each stage; it reads its commands from a FIFO.
mkfifo /run/kpts-client.in
ip netns exec kpts-client "$NODE" /kpts/traffic.mjs client 10.96.0.50 80 </run/kpts-client.in >"$O/client.txt" 2>&1 &
client=$!
exec 3>/run/kpts-client.in
ask probe started
ask send before-restart
STEP_TIMEOUT=620 run restart systemctl restart kube-proxy-ts
run show-restarted systemctl show kube-proxy-ts -p ActiveState,SubState,MainPID,StatusText
# The unit's CacheDirectory= holds Node's compile cache, filled by the first start: root-only.
run compile-cache sh -c 'stat -c %a /var/cache/kube-proxy-ts && find /var/cache/kube-proxy-ts -type f | wc -l'
ask send after-restart
ask probe restarted
STEP_TIMEOUT=200 run stop systemctl stop kube-proxy-ts
run show-stopped systemctl show kube-proxy-ts -p ActiveState,SubState,Result
run nft-stopped nft list tables
# Nothing runs now: what answers is the kernel alone, with the rules the daemon left.
ask send after-stop
ask probe stopped
run journal journalctl -u kube-proxy-ts --since "$(cat "$O/since")" -o json --no-pager
run journal-text journalctl -u kube-proxy-ts --no-pager -o short-monotonic
if [ "$(cat "$O/mode")" = real ]; then
  run cleanup /usr/bin/kube-proxy-ts --cleanup
  run nft-cleaned nft list tables
  ask probe cleaned
fi
exec 3>&-
kill "$client" "$backend" 2>/dev/null
wait

# Remove keeps the conffiles and disables nothing it should not; purge leaves nothing.
run dpkg-remove dpkg --force-unsafe-io --remove kube-proxy-ts
run show-removed systemctl show kube-proxy-ts -p LoadState,ActiveState
run conffiles-after-remove ls /etc/kube-proxy-ts/config.yaml /etc/default/kube-proxy-ts
# The admin's kubeconfig is not the package's: purge would leave it (and its directory).
rm -f /etc/kube-proxy-ts/kubeconfig
run dpkg-purge dpkg --force-unsafe-io --purge kube-proxy-ts
run status-after-purge dpkg-query -W -f='${Status}\n' kube-proxy-ts
# Anything left with our name where a package puts files or state (the journal aside).
rm -rf /etc/systemd/system/kube-proxy-ts.service.d  # the test's own drop-in
run leftovers sh -c 'ls -d /usr/lib/kube-proxy-ts /usr/bin/kube-proxy-ts /usr/share/man/man8/kube-proxy-ts.8.gz /usr/share/doc/kube-proxy-ts /lib/systemd/system/kube-proxy-ts.service 2>/dev/null; find /etc /var/lib /var/cache /run \( -path /run/log \) -prune -o -name "*kube-proxy-ts*" -print'
 run run-dir test -e /run/kube-proxy-ts
echo "$(cut -d' ' -f1 /proc/uptime) done" >>"$O/steps"
echo 0 >"$O/status"
