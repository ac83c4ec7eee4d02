#!/usr/bin/env bash
# The demo: two sites, two tenants with the same address plan, one vecgate
# per site, tenant "blue" over GRE and tenant "red" over VXLAN across one
# underlay. Real traffic (ping, a byte-checked TCP transfer per tenant), a
# capture showing the tenants stay apart, then a results table measured side
# by side with `vecgate perf`: vecgate's tunnels vs Linux kernel forwarding
# and Open vSwitch on the same topology.
#
#   site A                                                    site B
#   blue-a 10.1.0.2 ─┐                                    ┌─ blue-b 10.2.0.2
#                    gw-a ══ 192.0.2.1 ═ underlay ═ 192.0.2.2 ══ gw-b
#   red-a  10.1.0.2 ─┘   blue: GRE key 100, red: VXLAN VNI 200 └─ red-b  10.2.0.2
#
# Everything it creates is removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
VECGATE=${VECGATE:-$PWD/target/release/vecgate}
[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo)" >&2; exit 1; }
[ -x "$VECGATE" ] || { echo "demo: $VECGATE missing (make release)" >&2; exit 1; }

T=vgd$$
NS=(${T}ba ${T}ra ${T}bb ${T}rb ${T}ga ${T}gb)
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in "${NS[@]}"; do ip netns pids $ns 2>/dev/null | xargs -r kill -9; ip netns del $ns 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

BA=${T}ba RA=${T}ra BB=${T}bb RB=${T}rb GA=${T}ga GB=${T}gb
step "topology: 2 sites x 2 tenants (blue, red: same addresses), one vecgate per site"
for ns in "${NS[@]}"; do ip netns add $ns; ip -n $ns link set lo up; done
ip link add eth0 netns $BA type veth peer name blue netns $GA
ip link add eth0 netns $RA type veth peer name red netns $GA
ip link add eth0 netns $BB type veth peer name blue netns $GB
ip link add eth0 netns $RB type veth peer name red netns $GB
ip link add wan netns $GA type veth peer name wan netns $GB
for ns in $BA $RA $BB $RB; do ip -n $ns link set eth0 up; done
for l in blue red wan; do ip -n $GA link set $l up; ip -n $GB link set $l up; done
for ns in $BA $RA; do ip -n $ns addr add 10.1.0.2/24 dev eth0; ip -n $ns route add default via 10.1.0.1; done
for ns in $BB $RB; do ip -n $ns addr add 10.2.0.2/24 dev eth0; ip -n $ns route add default via 10.2.0.1; done

site() { # name lan-net wan-ip peer-wan remote-net tun-addr tun-peer
cat <<CFG
[gateway]
name = "$1"
workers = 2
api = "unix:$WORK/$1.sock"

[[interface]]
name = "blue"
host = "blue"
driver = "af_packet"
addresses = ["$2"]
vrf = "blue"

[[interface]]
name = "red"
host = "red"
driver = "af_packet"
addresses = ["$2"]
vrf = "red"

[[interface]]
name = "wan"
host = "wan"
driver = "af_packet"
addresses = ["$3/24"]

[[tunnel]]
name = "blue-gre"
kind = "gre"
local = "$3"
remote = "$4"
key = 100
vrf = "blue"

[[tunnel]]
name = "red-vxlan"
kind = "vxlan"
local = "$3"
remote = "$4"
key = 200
vrf = "red"
addresses = ["$6/24"]

[[route]]
vrf = "blue"
prefix = "$5"
via = "blue-gre"

[[route]]
vrf = "red"
prefix = "$5"
via = "$7"
CFG
}
site gw-a 10.1.0.1/24 192.0.2.1 192.0.2.2 10.2.0.0/24 10.9.0.1 10.9.0.2 > "$WORK/gw-a.toml"
site gw-b 10.2.0.1/24 192.0.2.2 192.0.2.1 10.1.0.0/24 10.9.0.2 10.9.0.1 > "$WORK/gw-b.toml"

step "vecgate check"
"$VECGATE" check --config "$WORK/gw-a.toml"
"$VECGATE" check --config "$WORK/gw-b.toml"

step "vecgate run (one per site)"
for g in a b; do
  ns=$GA; [ $g = b ] && ns=$GB
  nsx $ns "$VECGATE" run --config "$WORK/gw-$g.toml" --log-level warn >"$WORK/gw-$g.log" 2>&1 &
  PIDS+=($!)
done
for g in a b; do
  for _ in $(seq 200); do [ -S "$WORK/gw-$g.sock" ] && break; sleep 0.05; done
  [ -S "$WORK/gw-$g.sock" ] || { cat "$WORK/gw-$g.log"; exit 1; }
done
"$VECGATE" show interfaces --api "unix:$WORK/gw-a.sock"
echo
"$VECGATE" show tunnels --api "unix:$WORK/gw-a.sock"
echo
"$VECGATE" show routes --api "unix:$WORK/gw-a.sock"

step "ping across each tenant's tunnel"
nsx $BA ping -c 3 -i 0.2 -W 2 10.2.0.2
nsx $RA ping -c 3 -i 0.2 -W 2 10.2.0.2

step "TCP transfer per tenant, 32 MiB each, checked byte for byte; capture on red-b"
cat > "$WORK/rx.py" <<'PY'
import socket, hashlib
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7000)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); h = hashlib.sha256(); n = 0
while True:
    b = c.recv(1 << 20)
    if not b: break
    h.update(b); n += len(b)
print(h.hexdigest(), n)
PY
cat > "$WORK/tx.py" <<'PY'
import socket, hashlib, os, sys, time
d = os.urandom(32 << 20)
for _ in range(100):
    try:
        s = socket.create_connection(("10.2.0.2", 7000), timeout=30); break
    except ConnectionRefusedError:
        time.sleep(0.1)
s.sendall(d); s.close()
print(hashlib.sha256(d).hexdigest(), len(d))
PY
nsx $RB tcpdump -U --immediate-mode -ni eth0 -w "$WORK/red-b.pcap" tcp port 7000 2>/dev/null &
DUMP=$!; PIDS+=($DUMP); sleep 1
for pair in "$BA $BB blue" "$RA $RB red"; do
  set -- $pair
  nsx $2 python3 "$WORK/rx.py" > "$WORK/rx-$3.out" &
  RX=$!
  sent=$(nsx $1 python3 "$WORK/tx.py")
  wait $RX
  got=$(cat "$WORK/rx-$3.out")
  if [ "$sent" = "$got" ]; then echo "  $3: sha256 match ($got)"; else echo "  $3: MISMATCH sent=$sent got=$got"; exit 1; fi
done
sleep 0.5; kill $DUMP 2>/dev/null || true; wait $DUMP 2>/dev/null || true
red_bytes=$(tshark -r "$WORK/red-b.pcap" -T fields -e tcp.len 2>/dev/null | awk '{s+=$1} END {print s+0}')
echo "  red-b's capture saw $red_bytes TCP payload bytes on port 7000: red's own 33554432, none of blue's"
[ "$red_bytes" -ge 33554432 ] && [ "$red_bytes" -lt $((2 * 33554432)) ]

step "gateway counters (vecgate show errors / runtime on gw-b)"
"$VECGATE" show runtime --api "unix:$WORK/gw-b.sock" | head -20
"$VECGATE" show errors --api "unix:$WORK/gw-b.sock" | head -20

for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

step "results: the same site-to-site path, side by side (vecgate perf, 1 TCP stream, 1 run of 3 s each; 64K = large-MTU underlay)"
/usr/bin/python3 bench/bench.py --scenarios tunnels --runs 1 --duration 3 --streams 1 \
  --only kernel-plain,vecgate-gre,vecgate-gre-xdp,vecgate-gre-64k,vecgate-vxlan,vecgate-vxlan-64k,vecgate-esp-aes128gcm16-64k,kernel-vxlan,ovs-gre,strongswan-aes128gcm16 --summary
