"""FPM benchmark for bench.py (issue 18): how long routes announced by a
BGP peer take to reach vecgate's FIB through FRR's zebra (dplane_fpm_nl),
next to the same routes reaching the Linux kernel's table through the same
zebra, in the same run; and vecgate's memory per learned route.

    measure(n, rounds) -> dict   # bench.py's `fpm` scenario calls this
    python3 bench/fpm_bench.py [--routes 100000] [--rounds 3]

Topology (as crates/vecgate/tests/fpm_frr.rs):

    gw:  vecgate, wan 10.0.1.1/24 on the underlay segment, FPM server on
         10.255.0.1:2620 (a veth to ctl)
    ctl: zebra -M dplane_fpm_nl + bgpd AS 65001 (10.0.1.3): zebra installs
         every route into ctl's kernel table AND streams it to vecgate
    b:   bgpd AS 65002 (10.0.1.2) with N `network` statements, its session
         to ctl administratively down at first

Clock: t0 = B's `no neighbor 10.0.1.3 shutdown` (the session comes up and
B sends all N prefixes); vecgate's count is `vecgate_learned_routes{state=
"installed"}` from /metrics, the kernel's `ip route show proto bgp | wc -l`
in ctl, both polled every 50 ms until they reach N. The withdrawal is B's
`neighbor 10.0.1.3 shutdown` (ctl's bgpd drops every route at once) until
both counts are 0. Each round also announces and withdraws one more
prefix with N installed (BGP and zebra included, so next to the kernel's
time), and reads vecgate's own part of that change from /metrics:
`vecgate_fpm_update_delay_seconds`, from the FPM frame's arrival to the
FIB publish. The figures are the medians over `rounds` rounds of the same
run (announce, one more, one less, withdraw). Memory: vecgate's VmRSS after minus before the
announcement, divided by N (zebra's and bgpd's RSS for reference).

Needs root, FRR (scripts/install-deps.sh) and target/release/vecgate
(VECGATE overrides it)."""

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _bench():
    import bench
    return bench


def _api_get(sock, path):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(30)
    s.connect(sock)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: vecgate\r\nConnection: close\r\n\r\n".encode())
    out = b""
    while True:
        b = s.recv(1 << 20)
        if not b:
            break
        out += b
    s.close()
    return out.split(b"\r\n\r\n", 1)[-1].decode(errors="replace")


def _installed(sock):
    try:
        m = _api_get(sock, "/metrics")
    except OSError:
        return -1
    n = 0
    for line in m.splitlines():
        if line.startswith("vecgate_learned_routes{") and 'state="installed"' in line:
            n += int(float(line.rsplit(" ", 1)[1]))
    return n


def _metric(sock, name):
    """The sum of metric `name`'s samples (0 when absent)."""
    try:
        m = _api_get(sock, "/metrics")
    except OSError:
        return 0.0
    return sum(float(l.rsplit(" ", 1)[1]) for l in m.splitlines()
               if l.split("{")[0].split(" ")[0] in (name, name + "_total"))


def _median(v):
    v = sorted(x for x in v if x is not None)
    return v[len(v) // 2] if v else None


def _rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _pid_in(ns, name):
    out = subprocess.run(f"ip netns pids {ns}", shell=True, capture_output=True, text=True).stdout.split()
    for p in out:
        try:
            with open(f"/proc/{p}/comm") as f:
                if f.read().strip() == name:
                    return int(p)
        except OSError:
            pass
    return 0


class Frr:
    def __init__(self, ns, zebra_conf, bgpd_conf, fpm):
        self.ns = ns
        self.dir = tempfile.mkdtemp(prefix="vgfpm")
        for name, text in (("zebra", zebra_conf), ("bgpd", bgpd_conf)):
            with open(os.path.join(self.dir, f"{name}.conf"), "w") as f:
                f.write(text)
        subprocess.run(["chown", "-R", "frr:frr", self.dir], check=True)
        self.daemon("zebra", "-M dplane_fpm_nl" if fpm else "")
        self.daemon("bgpd", "")

    def daemon(self, name, extra):
        d = self.dir
        _bench().sh(f"ip netns exec {self.ns.name} /usr/lib/frr/{name} -d {extra} -f {d}/{name}.conf "
                    f"-i {d}/{name}.pid -z {d}/zserv.api --vty_socket {d} -P 0")

    def vtysh(self, *cmds):
        args = ["vtysh", "--vty_socket", self.dir]
        for c in cmds:
            args += ["-c", c]
        return subprocess.run(args, capture_output=True, text=True).stdout

    def close(self):
        for name in ("bgpd", "zebra"):
            try:
                with open(os.path.join(self.dir, f"{name}.pid")) as f:
                    os.kill(int(f.read().strip()), 9)
            except (OSError, ValueError):
                pass
        shutil.rmtree(self.dir, ignore_errors=True)


def _wait(cond, cap, poll=0.05):
    t0 = time.monotonic()
    while time.monotonic() - t0 < cap:
        v = cond()
        if v:
            return v
        time.sleep(poll)
    return None


def measure(n, rounds=3):
    b = _bench()
    gw, ctl, rb = b.NS("fgw"), b.NS("fctl"), b.NS("fb")
    frr = []
    proc = None
    api = f"/tmp/vgfpm{os.getpid()}.sock"
    cfgpath = f"/tmp/vgfpm{os.getpid()}.toml"
    try:
        b.veth(gw, "gw-b", rb, "b-gw")
        b.veth(ctl, "ctl-b", rb, "b-ctl")
        b.veth(gw, "fpm0", ctl, "fpm1")
        b.veth(gw, "gw-lan", rb, "unused")
        gw.sh("ip addr add 10.255.0.1/30 dev fpm0")
        ctl.sh("ip addr add 10.255.0.2/30 dev fpm1 && ip addr add 10.0.1.3/24 dev ctl-b")
        rb.sh("ip link add br0 type bridge && ip link set br0 up && ip link set b-gw master br0 && "
              "ip link set b-ctl master br0 && ip addr add 10.0.1.2/24 dev br0")
        with open(cfgpath, "w") as f:
            f.write(f"""[gateway]
name = "fpmbench"
workers = 1
api = "unix:{api}"

[[interface]]
name = "lan"
host = "gw-lan"
driver = "af_packet"
addresses = ["10.1.0.1/24"]

[[interface]]
name = "wan"
host = "gw-b"
driver = "af_packet"
addresses = ["10.0.1.1/24"]

[routing]
fpm = "10.255.0.1:2620"
""")
        proc = gw.popen([b.VECGATE, "run", "--config", cfgpath, "--log-level", "warn"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not _wait(lambda: os.path.exists(api) and _installed(api) >= 0, 30):
            raise RuntimeError("vecgate's API did not come up")
        prefixes = [f"10.{128 + i // 256 % 128}.{i % 256}.0/24" if i < 32768 else
                    f"{11 + i // 65536}.{i // 256 % 256}.{i % 256}.0/24" for i in range(n)]
        bconf = ("router bgp 65002\n no bgp ebgp-requires-policy\n no bgp network import-check\n"
                 " neighbor 10.0.1.3 remote-as 65001\n neighbor 10.0.1.3 timers 3 9\n"
                 " neighbor 10.0.1.3 timers connect 1\n neighbor 10.0.1.3 shutdown\n"
                 " address-family ipv4 unicast\n" + "".join(f"  network {p}\n" for p in prefixes) +
                 " exit-address-family\n")
        aconf = ("router bgp 65001\n no bgp ebgp-requires-policy\n neighbor 10.0.1.2 remote-as 65002\n"
                 " neighbor 10.0.1.2 timers 3 9\n neighbor 10.0.1.2 timers connect 1\n")
        frr.append(Frr(rb, "", bconf, False))
        frr.append(Frr(ctl, "fpm address 10.255.0.1 port 2620\n", aconf, True))
        fb, fa = frr
        # zebra connected to vecgate; B's bgpd has its N routes in its RIB.
        if not _wait(lambda: b.sh(f"ip netns exec {gw.name} ss -tnH state established '( sport = :2620 )'",
                          check=False).strip(), 60):
            raise RuntimeError("zebra never connected to vecgate's FPM server")

        def brib():
            m = re.search(r"RIB entries (\d+)", fb.vtysh("show bgp ipv4 unicast summary") or "")
            return int(m.group(1)) if m else 0
        _wait(lambda: brib() >= n, 300, 0.5)
        kernel_base = int(ctl.sh("ip route show proto bgp | wc -l").strip())
        rss0 = _rss_kb(proc.pid)

        def kernel():
            return int(ctl.sh("ip route show proto bgp | wc -l").strip()) - kernel_base

        res = {"routes": n, "rounds": rounds}
        rows = []
        for r in range(rounds):
            row = {}
            t0 = time.monotonic()
            fb.vtysh("configure terminal", "router bgp 65002", "no neighbor 10.0.1.3 shutdown")
            done = {}
            cap = 600
            while time.monotonic() - t0 < cap and len(done) < 2:
                now = time.monotonic() - t0
                if "vecgate" not in done and _installed(api) >= n:
                    done["vecgate"] = now
                if "kernel" not in done and kernel() >= n:
                    done["kernel"] = now
                time.sleep(0.05)
            row["announce_vecgate_s"] = done.get("vecgate")
            row["announce_kernel_s"] = done.get("kernel")
            time.sleep(1)
            if r == 0:
                rss1 = _rss_kb(proc.pid)
                res["vecgate_rss_mb"] = rss1 / 1024
                res["bytes_per_route"] = (rss1 - rss0) * 1024 / n if n else None
                res["zebra_rss_mb"] = _rss_kb(_pid_in(ctl.name, "zebra")) / 1024
                res["bgpd_rss_mb"] = _rss_kb(_pid_in(ctl.name, "bgpd")) / 1024
            # One more prefix with N installed, then withdrawn: the time a
            # single change takes (BGP and zebra included, so compared with
            # the kernel's), and vecgate's own part of it: from the frame's
            # arrival to the FIB publish (vecgate_fpm_update_delay_seconds).
            for add in (True, False):
                t2 = time.monotonic()
                fb.vtysh("configure terminal", "router bgp 65002", "address-family ipv4 unicast",
                         ("" if add else "no ") + "network 9.9.9.0/24")
                want = n + 1 if add else n
                done = {}
                while time.monotonic() - t2 < 60 and len(done) < 2:
                    now = time.monotonic() - t2
                    if "vecgate" not in done and _installed(api) == want:
                        done["vecgate"] = now
                    if "kernel" not in done and kernel() == want:
                        done["kernel"] = now
                    time.sleep(0.01)
                k = "one_more" if add else "one_less"
                row[f"{k}_vecgate_s"] = done.get("vecgate")
                row[f"{k}_kernel_s"] = done.get("kernel")
                row[f"{k}_fpm_to_fib_ms"] = _metric(api, "vecgate_fpm_update_delay_seconds") * 1000
            t1 = time.monotonic()
            fb.vtysh("configure terminal", "router bgp 65002", "neighbor 10.0.1.3 shutdown")
            done = {}
            while time.monotonic() - t1 < cap and len(done) < 2:
                now = time.monotonic() - t1
                if "vecgate" not in done and _installed(api) == 0:
                    done["vecgate"] = now
                if "kernel" not in done and kernel() <= 0:
                    done["kernel"] = now
                time.sleep(0.05)
            row["withdraw_vecgate_s"] = done.get("vecgate")
            row["withdraw_kernel_s"] = done.get("kernel")
            rows.append(row)
            print(f"round {r + 1}: {row}", file=sys.stderr)
        for k in rows[0]:
            res[k] = _median([row.get(k) for row in rows])
        res["fpm_to_fib_max_ms"] = _metric(api, "vecgate_fpm_update_delay_max_seconds") * 1000
        res["patches"] = int(_metric(api, "vecgate_fpm_patches"))
        m = _api_get(api, "/metrics")
        res["publishes"] = sum(int(float(l.rsplit(" ", 1)[1])) for l in m.splitlines()
                               if l.startswith("vecgate_fpm_publishes"))
        res["failures"] = sum(int(float(l.rsplit(" ", 1)[1])) for l in m.splitlines()
                              if l.startswith("vecgate_fpm_install_failures"))
        return res
    finally:
        for f in frr:
            f.close()
        if proc:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for ns in (gw, ctl, rb):
            ns.close()
        for p in (api, cfgpath):
            try:
                os.unlink(p)
            except OSError:
                pass


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--routes", type=int, default=100000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    print(measure(a.routes, a.rounds))
