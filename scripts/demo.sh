#!/usr/bin/env bash
# The demo: three sites, two tenants with the same address plan, one vecgate
# at sites A and B, tenant "blue" over GRE and tenant "red" over VXLAN across
# one underlay; site C is a third-party IPsec gateway — strongSwan's charon
# (kernel-libipsec) — that vecgate reaches over ESP keyed by IKEv2 (PSK).
# Real traffic (ping, a byte-checked TCP transfer per tenant and to site C),
# a capture showing the tenants stay apart, both sides' view of the IPsec
# SAs, then a results table measured side by side with `vecgate perf`:
# vecgate's tunnels and ESP vs Linux kernel forwarding, Open vSwitch and
# strongSwan on the same topology.
#
#   site A                                                    site B
#   blue-a 10.1.0.2 ─┐                                    ┌─ blue-b 10.2.0.2
#                    gw-a ══ 192.0.2.1 ═ underlay ═ 192.0.2.2 ══ gw-b
#   red-a  10.1.0.2 ─┘ ║ blue: GRE key 100, red: VXLAN VNI 200 └─ red-b  10.2.0.2
#                      ║ 203.0.113.1
#                      ║ blue: ESP (in UDP 4500), IKEv2
#                      ║ 203.0.113.3
#                    gw-c [strongSwan charon] ── site-c 10.3.0.2
#
# Everything it creates is removed on exit (success, failure or Ctrl-C).
set -euo pipefail
cd "$(dirname "$0")/.."
VECGATE=${VECGATE:-$PWD/target/release/vecgate}
[ "$(id -u)" = 0 ] || { echo "demo: run as root (sudo make demo)" >&2; exit 1; }
[ -x "$VECGATE" ] || { echo "demo: $VECGATE missing (make release)" >&2; exit 1; }

T=vgd$$
NS=(${T}ba ${T}ra ${T}bb ${T}rb ${T}ga ${T}gb ${T}gc ${T}hc)
WORK=$(mktemp -d)
PIDS=()
BENCH=
cleanup() {
  # The results run (bench.py, in the background so a signal reaches this
  # trap at once) has namespaces of its own, named after its pid.
  if [ -n "$BENCH" ]; then
    kill "$BENCH" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$BENCH" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$BENCH" 2>/dev/null || true
    wait "$BENCH" 2>/dev/null || true
    for ns in $(ip netns list | awk '{print $1}' | grep -E "^vgb$((BENCH % 100000))[a-zA-Z]"); do
      ip netns pids "$ns" | xargs -r kill -9; ip netns del "$ns" 2>/dev/null || true
    done
  fi
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in "${NS[@]}"; do ip netns pids $ns 2>/dev/null | xargs -r kill -9; ip netns del $ns 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
nsx() { local ns=$1; shift; ip netns exec "$ns" "$@"; }

BA=${T}ba RA=${T}ra BB=${T}bb RB=${T}rb GA=${T}ga GB=${T}gb GC=${T}gc HC=${T}hc
step "topology: 2 sites x 2 tenants (blue, red: same addresses), one vecgate per site; site C behind strongSwan"
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
# Site C: charon's namespace routes between its LAN and the underlay; its
# ESP runs in userspace behind a TUN device, so no offloads on that side
# (segments must fit the tunnel).
ip link add wanc netns $GA type veth peer name wan netns $GC
ip link add eth0 netns $HC type veth peer name lan netns $GC
ip -n $GA link set wanc up
for l in wan lan; do ip -n $GC link set $l up; done
ip -n $HC link set eth0 up
ip -n $GC addr add 203.0.113.3/24 dev wan
ip -n $GC addr add 10.3.0.1/24 dev lan
ip -n $HC addr add 10.3.0.2/24 dev eth0; ip -n $HC route add default via 10.3.0.1
nsx $GC sysctl -qw net.ipv4.ip_forward=1
for d in "$GC wan" "$GC lan" "$HC eth0"; do set -- $d; nsx $1 ethtool -K $2 tso off gso off gro off >/dev/null; done

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
# Site A's tunnel to site C: IPsec keyed by IKEv2 with charon (the PSK in a
# file of its own; vecgate initiates, charon responds).
PSK=demo-psk-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')
printf '%s\n' "$PSK" > "$WORK/site-c.psk"; chmod 600 "$WORK/site-c.psk"
cat >> "$WORK/gw-a.toml" <<CFG

[[interface]]
name = "wan-c"
host = "wanc"
driver = "af_packet"
addresses = ["203.0.113.1/24"]

[[tunnel]]
name = "blue-ipsec"
kind = "ipsec"
local = "203.0.113.1"
remote = "203.0.113.3"
vrf = "blue"
traffic = ["10.3.0.0/24"]

[tunnel.ike]
psk_file = "$WORK/site-c.psk"
remote_id = "gw-c.example.net"
ike_proposals = ["aes128-sha256-modp2048"]
esp_proposals = ["aes128gcm16"]
local_traffic = ["10.1.0.0/24"]
CFG
site gw-b 10.2.0.1/24 192.0.2.2 192.0.2.1 10.1.0.0/24 10.9.0.2 10.9.0.1 > "$WORK/gw-b.toml"

step "strongSwan charon at site C (kernel-libipsec), loaded through swanctl"
CH=$WORK/charon; mkdir -p "$CH/run"
cat > "$CH/strongswan.conf" <<CONF
charon {
  load = random nonce openssl kdf pem pkcs1 x509 kernel-libipsec kernel-netlink socket-default vici updown
  install_routes = yes
  plugins { vici { socket = unix://$CH/charon.vici } }
  filelog { log { path = $CH/charon.log
                  default = 1
                  ike = 1
                  esp = 1
                  net = 1 } }
}
CONF
cat > "$CH/swanctl.conf" <<CONF
connections {
  site-a {
    version = 2
    local_addrs = 203.0.113.3
    remote_addrs = 203.0.113.1
    proposals = aes128-sha256-modp2048
    local { auth = psk
            id = gw-c.example.net }
    remote { auth = psk
             id = 203.0.113.1 }
    children { blue { local_ts = 10.3.0.0/24
                      remote_ts = 10.1.0.0/24
                      esp_proposals = aes128gcm16
                      start_action = none } }
  }
}
secrets { ike-a { id-1 = gw-c.example.net
                  id-2 = 203.0.113.1
                  secret = "$PSK" } }
CONF
chmod 600 "$CH/swanctl.conf"
# (swanctl's stderr: plugins Debian does not ship, credential directories
# this set-up does not use.)
swanctl_c() { STRONGSWAN_CONF="$CH/strongswan.conf" nsx $GC swanctl "$@" --uri "unix://$CH/charon.vici" 2>/dev/null; }
# charon's pid file path is compiled in (/run): a private /run per netns exec.
STRONGSWAN_CONF="$CH/strongswan.conf" nsx $GC sh -c "mount --bind $CH/run /run && exec /usr/lib/ipsec/charon" >"$CH/charon.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 150); do [ -S "$CH/charon.vici" ] && break; sleep 0.1; done
[ -S "$CH/charon.vici" ] || { cat "$CH/charon.out"; exit 1; }
swanctl_c --load-all --file "$CH/swanctl.conf" | grep -E 'loaded|failed'
swanctl_c --list-conns | grep -q site-a || { echo "charon did not load the connection"; cat "$CH/charon.out"; exit 1; }

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
ike_up() { "$VECGATE" show ike --json --api "unix:$WORK/gw-a.sock" 2>/dev/null |
  python3 -c 'import json,sys; t=json.load(sys.stdin); sys.exit(0 if t and t[0]["state"]=="established" and t[0]["child_sas"] else 1)'; }
for _ in $(seq 300); do ike_up && break; sleep 0.1; done
ike_up || { echo "IKE with charon not established"; cat "$WORK/gw-a.log"; tail -20 "$CH/charon.log"; exit 1; }
"$VECGATE" show interfaces --api "unix:$WORK/gw-a.sock"
echo
"$VECGATE" show tunnels --api "unix:$WORK/gw-a.sock"
echo
"$VECGATE" show routes --api "unix:$WORK/gw-a.sock"

echo
"$VECGATE" show ike --api "unix:$WORK/gw-a.sock"

step "ping across each tenant's tunnel, and from blue-a to site C over IPsec"
nsx $BA ping -c 3 -i 0.2 -W 2 10.2.0.2
nsx $RA ping -c 3 -i 0.2 -W 2 10.2.0.2
nsx $BA ping -c 3 -i 0.2 -W 2 10.3.0.2

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
d = os.urandom(int(sys.argv[2]) << 20 if len(sys.argv) > 2 else 32 << 20)
for _ in range(100):
    try:
        s = socket.create_connection((sys.argv[1] if len(sys.argv) > 1 else "10.2.0.2", 7000), timeout=30); break
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

step "TCP transfer blue-a -> site C over IPsec (vecgate ESP <-> strongSwan), 16 MiB checked byte for byte"
nsx $HC python3 "$WORK/rx.py" > "$WORK/rx-c.out" &
RX=$!
sent=$(nsx $BA python3 "$WORK/tx.py" 10.3.0.2 16)
wait $RX
got=$(cat "$WORK/rx-c.out")
if [ "$sent" = "$got" ]; then echo "  site C: sha256 match ($got)"; else echo "  site C: MISMATCH sent=$sent got=$got"; exit 1; fi
echo
"$VECGATE" show sa --api "unix:$WORK/gw-a.sock"
echo
echo "  strongSwan's own view (swanctl --list-sas at gw-c):"
swanctl_c --list-sas | sed 's/^/  /'
# The gap between vecgate's outbound count and charon's inbound one, by
# independent counters: whole joined ESP-in-UDP datagrams the kernel refused
# at vecgate's wan-c (gw-c's receive backlog full: the veth's own tx-dropped
# counts them too), resent by TCP; and charon's socket overflows.
wanc_drops=$("$VECGATE" show stats --api "unix:$WORK/gw-a.sock" | awk '$1 == "wan-c" { print $NF }')
veth_drops=$(ip -n $GA -s -j link show wanc | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stats64"]["tx"]["dropped"])')
rcvbuf=$(nsx $GC cat /proc/net/snmp | awk '/^Udp:/ { if (!h) { for (i = 1; i <= NF; i++) c[$i] = i; h = 1 } else print $c["RcvbufErrors"] }')
echo "  vecgate wan-c transmit drops: $wanc_drops (veth wanc tx-dropped: $veth_drops); charon socket overflows: $rcvbuf"

step "gateway counters (vecgate show errors / runtime on gw-b)"
"$VECGATE" show runtime --api "unix:$WORK/gw-b.sock" | head -20
"$VECGATE" show errors --api "unix:$WORK/gw-b.sock" | head -20

for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
PIDS=()

step "results: the same site-to-site path, side by side (vecgate perf, 1 TCP stream, 1 run of 3 s each; 64K = large-MTU underlay)"
/usr/bin/python3 bench/bench.py --scenarios tunnels --runs 1 --duration 3 --streams 1 \
  --only kernel-plain,vecgate-gre,vecgate-gre-xdp,vecgate-gre-64k,vecgate-vxlan,vecgate-vxlan-64k,vecgate-esp-aes128gcm16,vecgate-esp-aes128gcm16-natt,vecgate-esp-aes128gcm16-64k,kernel-vxlan,ovs-gre,strongswan-aes128gcm16 --summary &
BENCH=$!
wait "$BENCH"
BENCH=
