"""DPDK `testpmd` as the reference forwarder (issue 17 item 5): `--forward-
mode=io` on `net_af_xdp` vdevs bound to the one-hop router's veths, the same
veths, queues and CPUs as vecgate's AF_XDP gateway; and `--forward-mode=
txonly` on h1's veth as a second generator (is the generator the limit?).

`dpdk-testpmd` comes from scripts/install-deps.sh (Debian 12 ships it only
in dpdk-dev; the script unpacks it behind /usr/local/bin/dpdk-testpmd).
Flags that work on this machine (DPDK 22.11, no hugepages, veth):
  --no-pci --no-huge -m 256     no hugepages, no PCI scan
  --file-prefix UNIQUE          per run (runtime dir /var/run/dpdk/UNIQUE,
                                removed afterwards); --in-memory is refused
                                with --no-huge ("--legacy-mem")
  --total-num-mbufs=16384       the default pool does not fit -m 256
  stdin a pipe kept open        without a terminal testpmd exits at once
                                (EOF at "Press enter to exit")
  --lcores 0@(CPUS),1@C0        main lcore anywhere on the gateway CPUs,
                                the forwarding lcore on the first, where
                                vecgate pins its worker 0
  one queue per port            net_af_xdp finds no ethtool channels on
                                veth: a single queue
`io` forwards port 0 -> port 1 and back unchanged (no MAC rewrite): a wire.
The hosts therefore address each other's MAC directly (permanent neighbour
entries for their gateway address holding the far host's MAC).
"""
import os
import shutil
import subprocess
import time

import peers

TESTPMD = os.environ.get("DPDK_TESTPMD", "dpdk-testpmd")


def available():
    return shutil.which(TESTPMD) is not None


def mac(ns, dev):
    return ns.sh(f"cat /sys/class/net/{dev}/address").strip()


def gateway_cpus():
    """The CPUs of bench.py's `gateway` pin, as a list."""
    out = []
    for part in peers._bench().PINS["gateway"].split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def eal_args(prefix, ifaces):
    """EAL and testpmd arguments for one forwarding lcore over one
    `net_af_xdp` port per interface, one queue each."""
    cpus = gateway_cpus()
    args = [TESTPMD, "--no-pci", "--no-huge", "-m", "256", "--file-prefix", prefix,
            "--lcores", f"0@({','.join(map(str, cpus))}),1@{cpus[0]}", "--log-level", "6"]
    for i, ifc in enumerate(ifaces):
        args += ["--vdev", f"net_af_xdp{i},iface={ifc},start_queue=0,queue_count=1"]
    return args + ["--", "--total-num-mbufs=16384", "--nb-cores=1"]


class TestPmd:
    """One testpmd process in a namespace; `close()` stops it (SIGINT
    detaches its XDP programs) and removes its runtime directory."""

    def __init__(self, ns, role, args, logpath):
        self.prefix = args[args.index("--file-prefix") + 1]
        self.logpath = logpath
        self.log = open(logpath, "w")
        self.proc = ns.popen(peers._bench().pinned(role, args), stdin=subprocess.PIPE,
                             stdout=self.log, stderr=subprocess.STDOUT)

    @property
    def pid(self):
        # `ip netns exec` and `taskset` exec, the wrapper script too.
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(2)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)

    def text(self):
        return peers._tail(self.logpath)


def start_router_testpmd(router):
    """testpmd io-forwarding between r-h1 and r-h2 of bench.py's one-hop
    `Router`; returns the TestPmd once a ping crosses it (a broken setup
    fails here, loudly, with testpmd's log).

    One queue per veth and one forwarding lcore for both directions, on the
    first gateway CPU: net_af_xdp takes a single queue on veth (veth has no
    ethtool channels; "queue count 2 is larger than combined queue count
    1"), and the generators fill only queue 0, which vecgate's worker 0
    serves on the same CPU. The main lcore only sleeps."""
    if not available():
        raise RuntimeError(f"{TESTPMD} not found: scripts/install-deps.sh installs it")
    h1_mac, h2_mac = mac(router.h1, "eth0"), mac(router.h2, "eth0")
    # A wire: each host's gateway address resolves to the other host.
    router.h1.sh(f"ip neigh replace 10.1.0.1 lladdr {h2_mac} dev eth0 nud permanent")
    router.h2.sh(f"ip neigh replace 10.2.0.1 lladdr {h1_mac} dev eth0 nud permanent")
    router.gen_dst_mac = h2_mac
    prefix = f"vgtp{router.r.name}"
    logpath = os.path.join(peers.out_dir(), f"{router.r.name}-testpmd.log")
    tp = TestPmd(router.r, "gateway", eal_args(prefix, ["r-h1", "r-h2"]) + ["--forward-mode=io", "--auto-start"],
                 logpath)
    deadline = time.time() + 40
    while True:
        ok = subprocess.run(["ip", "netns", "exec", router.h1.name, "ping", "-c", "1", "-W", "1", router.dst],
                            capture_output=True).returncode == 0
        if ok:
            return tp
        if not tp.alive() or time.time() > deadline:
            tp.close()
            raise RuntimeError("testpmd io forwarding: no ping crosses it\n" + tp.text())
        time.sleep(0.5)


def txonly_run(router, frame, duration, probe=lambda: None):
    """testpmd `--forward-mode=txonly` on h1's veth (one port, one queue, one
    forwarding lcore pinned to the sender's CPU): UDP frames of `frame`
    bytes (60 = 64 with the FCS) towards the hop for `duration` s once it
    sends. Returns the frames h1's veth sent (`tx_packets`, the generator's
    rate) and h2's received (`rx_packets`, what crossed the hop) in that
    window, and `probe()` taken at its edges."""
    b = peers._bench()
    cpu = b.PINS["sender"]
    dst_mac = getattr(router, "gen_dst_mac", None) or mac(router.r, "r-h1")
    prefix = f"vgtx{router.h1.name}"
    args = [TESTPMD, "--no-pci", "--no-huge", "-m", "256", "--file-prefix", prefix, "--lcores", f"0@{cpu},1@{cpu}",
            "--log-level", "6", "--vdev", "net_af_xdp0,iface=eth0,start_queue=0,queue_count=1", "--",
            "--total-num-mbufs=16384", "--nb-cores=1", "--forward-mode=txonly", f"--txpkts={frame}",
            f"--eth-peer=0,{dst_mac}", "--tx-ip=10.1.0.2,10.2.0.2", "--auto-start"]
    logpath = os.path.join(peers.out_dir(), f"{router.h1.name}-txonly.log")
    tp = TestPmd(router.h1, "sender", args, logpath)
    tx = "cat /sys/class/net/eth0/statistics/tx_packets"
    rx = "cat /sys/class/net/eth0/statistics/rx_packets"
    try:
        t0 = int(router.h1.sh(tx))
        deadline = time.time() + 40
        while int(router.h1.sh(tx)) - t0 < 1000:
            if not tp.alive() or time.time() > deadline:
                raise RuntimeError("testpmd txonly sends nothing\n" + tp.text())
            time.sleep(0.1)
        s0, r0, p0, c0 = int(router.h1.sh(tx)), int(router.h2.sh(rx)), probe(), time.time()
        time.sleep(duration)
        s1, r1, p1, c1 = int(router.h1.sh(tx)), int(router.h2.sh(rx)), probe(), time.time()
    finally:
        tp.close()
    return {"sent_pps": (s1 - s0) / (c1 - c0), "pps": (r1 - r0) / (c1 - c0), "received": r1 - r0,
            "seconds": c1 - c0, "probe": (p0, p1)}
