#!/usr/bin/env bash
# The demo: network namespaces joined by veth pairs, vecgate routing between
# them, real traffic (ping, a checked TCP transfer, `vecgate perf`), and a
# results table comparing vecgate with Linux kernel forwarding side by side.
#
#   site-a host h1 (10.1.0.2, fd01::2) ── vecgate ── h2 (10.2.0.2, fd02::2) site-b host
#
# Everything it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
VECGATE=${VECGATE:-$PWD/target/release/vecgate}
[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo)" >&2; exit 1; }
[ -x "$VECGATE" ] || { echo "demo: $VECGATE missing (make release)" >&2; exit 1; }

T=vgdemo$$
H1=${T}h1; H2=${T}h2; GW=${T}gw
WORK=$(mktemp -d)
GWPID=
cleanup() {
  [ -n "$GWPID" ] && kill "$GWPID" 2>/dev/null && wait "$GWPID" 2>/dev/null || true
  for ns in $H1 $H2 $GW; do ip netns pids $ns 2>/dev/null | xargs -r kill -9; ip netns del $ns 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "topology: h1 -- vecgate -- h2 in namespaces $H1 $GW $H2"
for ns in $H1 $H2 $GW; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add eth0 netns $H1 type veth peer name gw-h1 netns $GW
ip link add eth0 netns $H2 type veth peer name gw-h2 netns $GW
for ns in $H1 $H2; do ip -n $ns link set eth0 up; done
ip -n $GW link set gw-h1 up; ip -n $GW link set gw-h2 up
ip -n $H1 addr add 10.1.0.2/24 dev eth0; ip -n $H1 route add default via 10.1.0.1
ip -n $H2 addr add 10.2.0.2/24 dev eth0; ip -n $H2 route add default via 10.2.0.1
ip -n $H1 addr add fd01::2/64 dev eth0 nodad; ip -n $H1 -6 route add default via fd01::1
ip -n $H2 addr add fd02::2/64 dev eth0 nodad; ip -n $H2 -6 route add default via fd02::1

cat > "$WORK/gw.toml" <<CFG
[gateway]
name = "demo"
workers = 2
api = "unix:$WORK/demo.sock"

[[interface]]
name = "site-a"
host = "gw-h1"
driver = "af_packet"
addresses = ["10.1.0.1/24", "fd01::1/64"]

[[interface]]
name = "site-b"
host = "gw-h2"
driver = "af_packet"
addresses = ["10.2.0.1/24", "fd02::1/64"]
CFG
step "vecgate check"
"$VECGATE" check --config "$WORK/gw.toml"

step "vecgate run (log: $WORK/gw.log)"
ip netns exec $GW "$VECGATE" run --config "$WORK/gw.toml" >"$WORK/gw.log" 2>&1 &
GWPID=$!
for _ in $(seq 200); do grep -q ready "$WORK/gw.log" && break; sleep 0.05; done
grep -q ready "$WORK/gw.log" || { cat "$WORK/gw.log"; exit 1; }
sed 's/^/  /' "$WORK/gw.log"

step "ping across vecgate (IPv4 and IPv6)"
ip netns exec $H1 ping -c 3 -i 0.2 10.2.0.2
ip netns exec $H1 ping -6 -c 3 -i 0.2 fd02::2

step "TCP transfer h1 -> h2, 64 MiB, checked byte for byte"
head -c 67108864 /dev/urandom > "$WORK/blob"
want=$(sha256sum < "$WORK/blob" | cut -d' ' -f1)
ip netns exec $H2 sh -c "timeout 30 python3 -c '
import socket,hashlib
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((\"0.0.0.0\",7000)); s.listen(1)
c,_=s.accept(); h=hashlib.sha256(); n=0
while True:
    b=c.recv(1<<20)
    if not b: break
    h.update(b); n+=len(b)
print(h.hexdigest(), n)
' > $WORK/rx.out" &
RX=$!
sleep 0.5
ip netns exec $H1 python3 -c "
import socket; s=socket.create_connection(('10.2.0.2',7000)); s.sendall(open('$WORK/blob','rb').read()); s.close()"
wait $RX
got=$(cut -d' ' -f1 "$WORK/rx.out")
[ "$got" = "$want" ] && echo "  sha256 match: $got ($(cut -d' ' -f2 "$WORK/rx.out") bytes)" || { echo "  MISMATCH"; exit 1; }

kill "$GWPID"; wait "$GWPID" 2>/dev/null || true; GWPID=

step "results: vecgate vs Linux kernel forwarding, side by side (vecgate perf, 1 run of 3 s each)"
/usr/bin/python3 bench/bench.py --scenarios router --runs 1 --duration 3 --workers 2 --summary
