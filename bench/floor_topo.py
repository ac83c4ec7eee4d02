"""The I/O floor contenders (issue 17): `vecgate-floor`, the smallest
forwarder on vecgate's own AF_PACKET + virtio-net-header path (receive
ring, send each frame straight from its ring slot, no processing; see
crates/io/src/floor.rs), in the same topologies as vecgate, so every table
can show how far vecgate is from what its I/O path allows.

The floor answers no ARP: the hosts get permanent neighbour entries for
their gateway address, holding the floor's port MAC.
"""
import os
import subprocess
import time

import peers
from peers import UNDERLAY_A, UNDERLAY_B, _SiteToSite

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLOOR = os.environ.get("VECGATE_FLOOR", os.path.join(ROOT, "target", "release", "vecgate-floor"))


def mac(ns, dev):
    return ns.sh(f"cat /sys/class/net/{dev}/address").strip()


def static_gateway(host, gw_ip, gw_mac):
    host.sh(f"ip neigh replace {gw_ip} lladdr {gw_mac} dev eth0 nud permanent")


def per_packet_hosts(*hosts, mtu=1500):
    """Hosts that send every frame at most `mtu` long: TSO off, GSO kept,
    so the hosts' TCP still builds 64 KB skbs (as for vecgate's rows) and
    their kernel segments each in software just before the veth: no
    super-packet reaches the gateway. Checksum offload stays on."""
    for h in hosts:
        h.sh(f"ip link set eth0 mtu {mtu}; ethtool -K eth0 tso off >/dev/null")


def wait_ready(logpath, proc, what):
    deadline = time.time() + 20
    while True:
        with open(logpath) as f:
            text = f.read()
        if "ready" in text:
            return
        if proc.poll() is not None or time.time() > deadline:
            raise RuntimeError(f"{what}: vecgate-floor did not start:\n{text}")
        time.sleep(0.05)


def floor_args(a, b, a_peer, b_peer, workers=1, gre=None, driver="af_packet"):
    args = [FLOOR, "forward", "--a", a, "--b", b, "--a-peer", a_peer, "--b-peer", b_peer,
            "--workers", str(workers), "--driver", driver]
    if gre:
        args += ["--gre", f"{gre[0]},{gre[1]}"]
    return args


class FloorTunnel(_SiteToSite):
    """The tunnel twin: a floor in each gateway prepends a precomputed
    Ethernet + IPv4 + GRE header on the way out (an iovec in front of the
    frame in its ring slot) and strips it on the way in.

    `per_packet=False`: hosts keep TSO/GSO, the underlay has a 64K MTU, 64 KB
    super-packets cross whole (the twin of vecgate's 64K-MTU-underlay rows).
    `per_packet=True`: hosts send frames of at most 1476 bytes (TSO off)
    so the GRE packets fit a 1500-byte underlay: every frame crosses every
    ring on its own (the per-packet floor of vecgate's 1500-underlay rows,
    which take super-packets from the hosts and segment them)."""

    encap_filter = "ip proto 47"

    def __init__(self, per_packet, workers=1, driver="af_packet"):
        self.per_packet = per_packet or driver == "af_xdp"
        self.workers = workers
        self.driver = driver
        self.label = ("I/O floor GRE twin, per-packet (hosts MTU 1476, TSO off), 1500 underlay" if self.per_packet
                      else "I/O floor GRE twin, 64K-MTU underlay") + (", AF_XDP" if driver == "af_xdp" else "")
        super().__init__()

    def build(self):
        if not os.path.exists(FLOOR):
            raise RuntimeError(f"{FLOOR} missing: `make floor` builds it")
        self.h1.sh("ip addr add 10.1.0.2/24 dev eth0; ip route add default via 10.1.0.1")
        self.h2.sh("ip addr add 10.2.0.2/24 dev eth0; ip route add default via 10.2.0.1")
        self.dst = "10.2.0.2"
        if self.per_packet:
            per_packet_hosts(self.h1, self.h2, mtu=1476)
        else:
            self.gwa.sh("ip link set a-u mtu 65535")
            self.gwb.sh("ip link set b-u mtu 65535")
        static_gateway(self.h1, "10.1.0.1", mac(self.gwa, "a-h1"))
        static_gateway(self.h2, "10.2.0.1", mac(self.gwb, "b-h2"))
        for side, ns, lan, wan, host, peer_ns, peer_wan, local, remote in (
                ("a", self.gwa, "a-h1", "a-u", self.h1, self.gwb, "b-u", UNDERLAY_A, UNDERLAY_B),
                ("b", self.gwb, "b-h2", "b-u", self.h2, self.gwa, "a-u", UNDERLAY_B, UNDERLAY_A)):
            logname = f"floor-{side}.log"
            p = self.spawn(ns, floor_args(lan, wan, mac(host, "eth0"), mac(peer_ns, peer_wan), self.workers,
                                          gre=(local, remote), driver=self.driver), logname, gateway=True)
            wait_ready(os.path.join(self.dir, logname), p, self.label)

    def verify_underlay(self):
        """AF_XDP redirects frames before any tap sees them, so tcpdump
        cannot judge that twin: there the pings must come back and both
        underlay veths must count them sent (nothing but the floors can
        send there: the gateways have no addresses and no forwarding)."""
        if self.driver != "af_xdp":
            return super().verify_underlay()

        def sent():
            return [int(ns.sh(f"cat /sys/class/net/{dev}/statistics/tx_packets"))
                    for ns, dev in ((self.gwa, "a-u"), (self.gwb, "b-u"))]
        before = sent()
        r = subprocess.run(["ip", "netns", "exec", self.h1.name, "ping", "-c", "5", "-i", "0.2", "-W", "2",
                            "-s", "200", self.dst], capture_output=True, text=True)
        n = [a - b for a, b in zip(sent(), before)]
        if r.returncode != 0 or min(n) < 5:
            raise RuntimeError(f"{self.label}: h1 -> h2 does not cross the underlay (ping rc {r.returncode}, "
                               f"underlay frames sent {n})\n" + self.diagnostics())

    def diagnostics(self):
        out = []
        for side in ("a", "b"):
            out.append(peers._tail(os.path.join(self.dir, f"floor-{side}.log")))
        return "\n".join(out)


def start_router_floor(router, workers, per_packet=False, driver="af_packet"):
    """The floor as bench.py's one-hop `Router`: r-h1 <-> r-h2, no
    addresses and no forwarding in r; returns the process."""
    static_gateway(router.h1, "10.1.0.1", mac(router.r, "r-h1"))
    static_gateway(router.h2, "10.2.0.1", mac(router.r, "r-h2"))
    if per_packet:
        per_packet_hosts(router.h1, router.h2)
    logpath = os.path.join(peers.out_dir(), f"{router.r.name}-floor.log")
    args = floor_args("r-h1", "r-h2", mac(router.h1, "eth0"), mac(router.h2, "eth0"), workers, driver=driver)
    p = router.r.popen(peers._bench().pinned("gateway", args), stdout=subprocess.DEVNULL, stderr=open(logpath, "w"))
    wait_ready(logpath, p, "floor router")
    return p
