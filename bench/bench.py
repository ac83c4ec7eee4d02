#!/usr/bin/python3
"""vecgate's benchmark suite: builds namespace topologies, runs every scenario
side by side in one run (medians of several runs, interleaved so drift on a
shared machine hits every contender alike), and writes docs/benchmarks.md with
tables and plots.

Instrument: `vecgate perf` (NTttcp-style) for traffic; the gateway's own cost
is measured two ways and both are named in the output:
  * gateway process cycles/byte: CPU time of the gateway process (utime+stime
    from /proc/PID/stat) x TSC frequency / bytes received;
  * path cycles/byte: system-wide busy cycles (all CPUs, /proc/stat, counted by
    `vecgate perf` on the receiver) / bytes; the cost of a forwarding hop is
    path(hop) - path(direct veth), which is the only fair figure for kernel
    forwarding (it has no process to account).
"""
import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
VECGATE = os.environ.get("VECGATE", os.path.join(ROOT, "target", "release", "vecgate"))
# The gateway binary alone can be another build (before/after runs), the
# traffic tool staying the same: VECGATE_GATEWAY.
GATEWAY = os.environ.get("VECGATE_GATEWAY", VECGATE)
# Extra `[gateway]` lines for every vecgate the benchmarks start (a knob
# measured against its default, e.g. "idle_spin_us = 0"): VECGATE_GATEWAY_EXTRA.
GATEWAY_EXTRA = os.environ.get("VECGATE_GATEWAY_EXTRA", "")
OUT = os.path.join(ROOT, "bench", "out")
CLK_TCK = os.sysconf("SC_CLK_TCK")
PID = os.getpid()
_seq = [0]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError(f"command failed: {cmd}\n{r.stdout}\n{r.stderr}")
    return r.stdout


class NS:
    """A network namespace; `close()` deletes it and kills what runs in it."""

    def __init__(self, tag):
        _seq[0] += 1
        self.name = f"vgb{PID % 100000}{tag}{_seq[0]}"
        sh(f"ip netns add {self.name}")
        self.sh("ip link set lo up")

    def sh(self, cmd, check=True):
        return sh(f"ip netns exec {self.name} sh -c '{cmd}'", check)

    def popen(self, args, **kw):
        return subprocess.Popen(["ip", "netns", "exec", self.name] + args, **kw)

    def close(self):
        sh(f"ip netns pids {self.name} | xargs -r kill -9; ip netns del {self.name}", check=False)


def veth(a, aif, b, bif, queues=1):
    q = f" numrxqueues {queues} numtxqueues {queues}" if queues > 1 else ""
    sh(f"ip link add {aif} netns {a.name}{q} type veth peer name {bif} netns {b.name}{q}")
    a.sh(f"ip link set {aif} up")
    b.sh(f"ip link set {bif} up")


# Where every contender runs (issue 17 item 7): on this 2-core machine
# unpinned runs of one tool differ by 2x. Every contender's sender is on CPU
# 0, its receiver on CPU 1, its gateway processes (vecgate, vecgate-floor,
# ovs-vswitchd, charon) on CPUs 0-1, where vecgate and vecgate-floor pin
# worker i to the i-th CPU themselves. Kernel datapaths have no process:
# their softirq work runs on the CPU of whichever side hands them a packet.
def _pins():
    """Sender on the first CPU this process may use, receiver on the
    second (the first again on a 1-CPU machine), gateways on all of them:
    CPUs 0, 1 and 0-1 on the project's 2-core machine."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) > 1 and cpus == list(range(cpus[0], cpus[-1] + 1)):
        every = f"{cpus[0]}-{cpus[-1]}"
    else:
        every = ",".join(map(str, cpus))
    return {"sender": str(cpus[0]), "receiver": str(cpus[min(1, len(cpus) - 1)]), "gateway": every}


PINS = _pins()
# How a two-site topology's gateways are placed (ab.py --placement):
# "shared" (the default, every section of docs/benchmarks.md unless it says
# otherwise): every gateway process on PINS["gateway"], so with one worker
# both sites' gateways share the first CPU with the sender, and the kernel's
# per-frame work of the underlay runs there too. "per-site": each site on its
# own CPU, as if the two gateways were two machines: site A's gateway with
# the sender (PINS["sender"]), site B's with the receiver (PINS["receiver"]),
# and gwB's underlay receive steered to site B's CPU by RPS (`rps_cpus` on
# `b-u`; a veth's receive otherwise runs in the transmitting CPU's softirq).
# Applied alike to every two-gateway contender, kernel datapaths included.
PLACEMENT = "shared"
# Observed placement per contender: label -> {"sender", "receiver",
# "gateway"} as the kernel reports it (/proc/PID/task/*/status).
PLACEMENTS = {}


def pinned(role, args):
    """`args` started under `taskset -c PINS[role]` (taskset execs, so the
    pid stays the program's)."""
    return ["taskset", "-c", PINS[role]] + list(args)


def add_placement_arg(ap):
    """`--placement` of bench.py and ab.py; the caller sets PLACEMENT from
    it (`set_placement`)."""
    ap.add_argument("--placement", choices=["shared", "per-site"], default="shared",
                    help="where two-site topologies' gateways run (PLACEMENT): all on the gateway CPUs (default), "
                         "or each site on its own CPU with its underlay receive steered there")


def set_placement(placement):
    global PLACEMENT
    PLACEMENT = placement


def site_pinned(site, args):
    """A two-site topology's gateway process of `site` ("a" or "b")
    started where PLACEMENT puts it."""
    if PLACEMENT == "per-site":
        return ["taskset", "-c", PINS["sender" if site == "a" else "receiver"]] + list(args)
    return pinned("gateway", args)


def site_rps_mask():
    """The `rps_cpus` mask for gwB's underlay veth under PLACEMENT
    (None: leave the kernel's default, no steering)."""
    if PLACEMENT != "per-site":
        return None
    return format(1 << int(PINS["receiver"]), "x")


def cpus_allowed(pid, threads=True):
    """Every thread's allowed CPU list, e.g. "0-1" or "0; 0-1 ×3; 1" (only
    the main thread's with `threads=False`)."""
    seen = {}
    try:
        for tid in sorted(os.listdir(f"/proc/{pid}/task")) if threads else [str(pid)]:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("Cpus_allowed_list:"):
                        c = line.split(":", 1)[1].strip()
                        seen[c] = seen.get(c, 0) + 1
    except OSError:
        return "?"
    return "; ".join(f"{c} ×{n}" if n > 1 else c for c, n in sorted(seen.items()))


def record_placement(topo, rx_pid, tx_pid, gw_pids):
    label = topo_label(topo)
    if label in PLACEMENTS:
        return
    PLACEMENTS[label] = {"sender": cpus_allowed(tx_pid), "receiver": cpus_allowed(rx_pid),
                         "gateway": " + ".join(cpus_allowed(p) for p in gw_pids) if gw_pids else
                         "no process (kernel datapath)",
                         "gateway_procs": [cpus_allowed(p, threads=False) for p in gw_pids]}


def topo_label(topo):
    return getattr(topo, "label", None) or type(topo).__name__


def tsc_hz():
    """Nominal TSC frequency: the kernel's tsc_khz if exported, else cpu MHz."""
    try:
        out = sh("dmesg 2>/dev/null | grep -o 'tsc: Refined TSC clocksource calibration: [0-9.]* MHz' | tail -1", check=False)
        if out.strip():
            return float(out.split()[-2]) * 1e6
    except Exception:
        pass
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) * 1e6
    return 2.0e9


def proc_cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def thread_ticks(pids):
    """{tid: (user+system clock ticks so far, CPU it last ran on)} of every
    thread of `pids` (/proc/PID/task/TID/stat fields 14, 15 and 39)."""
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out[tid] = (int(fields[11]) + int(fields[12]), int(fields[36]))
            except (OSError, IndexError, ValueError):
                pass
    return out


def carrier_cpu(before, after):
    """The CPU of the gateway thread that gained the most CPU time between two
    `thread_ticks` snapshots: where the traffic was carried. With several
    workers the kernel's fanout hash (for TCP the sender's random per-socket
    txhash) puts one stream on any of them, so a one-stream run on this
    2-CPU machine shares its CPU with the sender or with the receiver by
    chance — worth 1.5× to vecgate and to the floor alike: runs are compared
    within one placement (`ab.py`, the router table). None when no thread
    did at least two thirds of the work (several streams over several
    workers: no single placement)."""
    gained = [(t - before.get(tid, (0, 0))[0], cpu) for tid, (t, cpu) in after.items()]
    total = sum(g for g, _ in gained)
    if not gained or total <= 0:
        return None
    top, cpu = max(gained)
    return cpu if 3 * top >= 2 * total else None


def runs_with_cpu(runs, mixed=None, sep=", "):
    """'10.66@0, 16.47@1' when the runs were carried on different CPUs (or
    `mixed` says a wider set of runs was), plain Gbit/s otherwise."""
    if mixed is None:
        mixed = len({r["carrier_cpu"] for r in runs if r.get("carrier_cpu") is not None}) > 1
    return sep.join(fmt(r["gbps"]) + (f"@{r.get('carrier_cpu')}" if mixed else "") for r in runs)


# The CPU flags the datapath's speed depends on: AES-GCM (aes, vaes,
# pclmulqdq, vpclmulqdq), SHA-1/256 (sha_ni), wide copies (avx2, avx512*).
FLAGS = ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "avx2", "avx512f", "avx512bw", "avx512vl",
         "avx512_vaes", "erms", "fsrm")


def machine():
    cpu, flags = "unknown", set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name") and cpu == "unknown":
                cpu = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    have = [f for f in FLAGS if f in flags] + sorted(f for f in flags if f.startswith("avx512") and f not in FLAGS)
    return {"cpu": cpu, "cores": os.cpu_count(), "kernel": platform.release(),
            "tsc_ghz": round(tsc_hz() / 1e9, 3), "flags": have,
            "missing_flags": [f for f in FLAGS if f not in flags], "memcpy": memcpy_bandwidth()}


def memcpy_bandwidth():
    """Cold (256 MiB buffers) and hot (64 KiB) memcpy GB/s of one core,
    measured now by `vecgate-floor memcpy` pinned to the sender's CPU; the
    figure a copy-bound datapath scales with."""
    import floor_topo
    if not os.path.exists(floor_topo.FLOOR):
        return None
    try:
        out = sh(" ".join(pinned("sender", [floor_topo.FLOOR, "memcpy"])))
        return json.loads(out)
    except Exception as e:
        log(f"memcpy measurement failed: {e}")
        return None


# ---------------------------------------------------------------- topologies

class Router:
    """h1 -- R -- h2, where R is a direct veth (no hop), Linux kernel
    forwarding, or vecgate with AF_PACKET ports."""

    def __init__(self, mode, workers=1, offloads=True, driver="af_packet", per_packet=False):
        self.mode = mode
        # Gateways that spin when idle (frozen by `quiesce` while another
        # contender is measured): vecgate with busy_poll, testpmd's lcore.
        self.busy_poll = mode in ("vecgate-busy", "testpmd")
        self.label = LABELS.get(mode + ("" if driver == "af_packet" else "-xdp"), mode) + (
            "" if offloads else ", offloads off") + (", per-packet hosts" if per_packet else "")
        self.gw = None
        self.h1, self.h2 = NS("h1"), NS("h2")
        self.nss = [self.h1, self.h2]
        if mode == "direct":
            veth(self.h1, "eth0", self.h2, "eth0")
            self.h1.sh("ip addr add 10.1.0.2/24 dev eth0")
            self.h2.sh("ip addr add 10.1.0.3/24 dev eth0")
            self.dst = "10.1.0.3"
            return
        self.r = NS("r")
        self.nss.append(self.r)
        # AF_XDP binds one socket per worker to its own rx queue.
        # testpmd's net_af_xdp takes one queue on veth (no ethtool channels).
        q = workers if driver == "af_xdp" and mode != "testpmd" else 1
        veth(self.h1, "eth0", self.r, "r-h1", queues=q)
        veth(self.h2, "eth0", self.r, "r-h2", queues=q)
        self.h1.sh("ip addr add 10.1.0.2/24 dev eth0; ip route add default via 10.1.0.1")
        self.h2.sh("ip addr add 10.2.0.2/24 dev eth0; ip route add default via 10.2.0.1")
        self.dst = "10.2.0.2"
        if mode == "kernel":
            self.r.sh("ip addr add 10.1.0.1/24 dev r-h1; ip addr add 10.2.0.1/24 dev r-h2; "
                      "sysctl -qw net.ipv4.ip_forward=1")
        elif mode == "floor":
            import floor_topo
            self.gw = floor_topo.start_router_floor(self, workers, per_packet, driver)
        elif mode == "testpmd":
            import testpmd
            try:
                self.gw = testpmd.start_router_testpmd(self)
            except Exception:
                self.close()
                raise
        elif mode in ("vecgate", "vecgate-busy"):
            cfg = os.path.join(OUT, f"{self.r.name}.toml")
            with open(cfg, "w") as f:
                f.write(f"""[gateway]
name = "bench"
workers = {workers}
api = "unix:{OUT}/{self.r.name}.sock"
state_dir = "{OUT}/{self.r.name}.state"
{"busy_poll = true" if mode == "vecgate-busy" else ""}
{GATEWAY_EXTRA}

[[interface]]
name = "h1"
host = "r-h1"
driver = "{driver}"
addresses = ["10.1.0.1/24"]
offloads = {str(offloads).lower()}

[[interface]]
name = "h2"
host = "r-h2"
driver = "{driver}"
addresses = ["10.2.0.1/24"]
offloads = {str(offloads).lower()}
""")
            self.gw = self.r.popen(pinned("gateway", [GATEWAY, "run", "--config", cfg]),
                                   stdout=subprocess.DEVNULL, stderr=open(cfg + ".log", "w"))
            deadline = time.time() + 20
            while True:
                with open(cfg + ".log") as f:
                    if "ready" in f.read():
                        break
                if self.gw.poll() is not None or time.time() > deadline:
                    raise RuntimeError("vecgate did not start:\n" + open(cfg + ".log").read())
                time.sleep(0.05)
        self.h1.sh(f"ping -c 1 -W 2 {self.dst} >/dev/null || ping -c 3 -W 2 {self.dst} >/dev/null")

    def gateway_pid(self):
        if self.gw is None:
            return None
        # `ip netns exec` execs the binary, so the Popen pid is vecgate's.
        return self.gw.pid

    def close(self):
        if hasattr(self.gw, "close"):
            self.gw.close()
        elif self.gw is not None:
            self.gw.terminate()
            try:
                self.gw.wait(5)
            except subprocess.TimeoutExpired:
                self.gw.kill()
        for ns in self.nss:
            ns.close()


def cpu_times():
    """{cpu: (busy, total)} jiffies of every CPU from /proc/stat: what the
    machine itself saw, whoever ran there."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            name, *vals = line.split()
            if name.startswith("cpu") and name != "cpu":
                v = [int(x) for x in vals[:8]]
                idle = v[3] + v[4]  # idle + iowait
                out[int(name[3:])] = (sum(v) - idle, sum(v))
    return out


def cpu_busy(before, after):
    """Busy % of each CPU between two `cpu_times()` readings, in CPU order."""
    return [round(100.0 * (after[c][0] - before[c][0]) / max(after[c][1] - before[c][1], 1), 1)
            for c in sorted(after) if c in before]


def perf_run(topo, streams, duration, port=5201, udp=False, io_size=None):
    """One `vecgate perf` run (TCP, or UDP with `udp`) from h1 to h2; returns
    a result dict."""
    rx = topo.h2.popen(pinned("receiver", [VECGATE, "perf", "receive", "-p", str(port), "--json", "-q",
                                           "--timeout", "20"]),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.3)
    pids = topo.gateway_pids() if hasattr(topo, "gateway_pids") else [p for p in [topo.gateway_pid()] if p]
    c0 = sum(proc_cpu_seconds(p) for p in pids) if pids else None
    t0 = thread_ticks(pids)
    m0 = cpu_times()
    tx = topo.h1.popen(pinned("sender", [VECGATE, "perf", "send", topo.dst, "-p", str(port), "-t", str(streams),
                                         "-d", str(duration), "--warmup", "1", "--json", "-q"]
                              + (["--udp"] if udp else []) + (["-l", str(io_size)] if io_size else [])),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.1)
    record_placement(topo, rx.pid, tx.pid, pids)
    txo, txe = tx.communicate(timeout=duration + 60)
    rxo, rxe = rx.communicate(timeout=30)
    busy = cpu_busy(m0, cpu_times())
    c1 = sum(proc_cpu_seconds(p) for p in pids) if pids else None
    carrier = carrier_cpu(t0, thread_ticks(pids)) if pids else None
    if tx.returncode != 0 or rx.returncode != 0:
        raise RuntimeError(f"perf failed: send rc={tx.returncode} {txe}\nreceive rc={rx.returncode} {rxe}")
    r = json.loads(rxo)
    s = json.loads(txo)
    out = {
        "gbps": r["throughput_gbps"],
        "path_cpb": r.get("cycles_per_byte_system"),
        "cpu_pct_system": r.get("cpu_pct_system"),
        "retrans": s.get("tcp_retrans"),
        "bytes": r["bytes"],
        "pps": r.get("packets_per_s"),
        "loss_pct": r.get("loss_pct"),
        # Busy % of every CPU over the run (warm-up included): which one
        # the run was bound by.
        "cpu_busy": busy,
    }
    out["rx_cpu_pct"] = r.get("cpu_pct_process")
    out["rx_cpb"] = r.get("cycles_per_byte_process")
    if pids:
        # The gateways' CPU over the whole run (warm-up included) divided by
        # the bytes of the whole run, as the sender counted them.
        total = s.get("total_bytes") or r["bytes"]
        out["gw_cpb"] = (c1 - c0) * tsc_hz() / max(total, 1)
        out["gw_cpu_s"] = c1 - c0
        out["carrier_cpu"] = carrier
    return out


def perf_multi(topo, duration, base_port=5301):
    """One TCP stream to each of `topo.dsts()` at once (one vecgate perf
    pair per destination, so each flow takes its own tunnel); returns the
    aggregate Gbit/s and the gateways' cycles/byte."""
    dsts = topo.dsts()
    rxs, txs = [], []
    for i, _ in enumerate(dsts):
        rxs.append(topo.h2.popen(pinned("receiver", [VECGATE, "perf", "receive", "-p", str(base_port + 10 * i),
                                                     "--json", "-q", "--timeout", "20"]),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    time.sleep(0.5)
    pids = topo.gateway_pids()
    c0 = sum(proc_cpu_seconds(p) for p in pids)
    for i, d in enumerate(dsts):
        txs.append(topo.h1.popen(pinned("sender", [VECGATE, "perf", "send", d, "-p", str(base_port + 10 * i), "-d",
                                                   str(duration), "--warmup", "1", "--json", "-q"]),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    gbps, total = 0.0, 0
    for tx, rx in zip(txs, rxs):
        txo, txe = tx.communicate(timeout=duration + 60)
        rxo, rxe = rx.communicate(timeout=30)
        if tx.returncode or rx.returncode:
            raise RuntimeError(f"perf failed: {txe} {rxe}")
        gbps += json.loads(rxo)["throughput_gbps"]
        total += json.loads(txo).get("total_bytes") or 0
    c1 = sum(proc_cpu_seconds(p) for p in pids)
    return {"gbps": gbps, "gw_cpb": (c1 - c0) * tsc_hz() / max(total, 1) / 2}


def scenario_ntunnels(args):
    """GRE and IPsec: 1 tunnel vs 8 tunnels, aggregate (one TCP stream per
    tunnel), 1500-byte and 64K-MTU underlays, 2 workers per gateway."""
    import vecgate_topo as vt
    variants = []
    for mtu, what in ((1500, "1500 underlay"), (65535, "64K-MTU underlay")):
        for n in (1, 8):
            variants.append((f"gre-{n}-{mtu}", f"vecgate GRE, {n} tunnel(s), {what}",
                             lambda n=n, mtu=mtu: vt.VecgateTunnel("gre", tunnels=n, workers=2, underlay_mtu=mtu)))
            variants.append((f"esp-{n}-{mtu}", f"vecgate ESP aes128gcm16, {n} tunnel(s), {what}",
                             lambda n=n, mtu=mtu: vt.VecgateTunnel("esp", algorithm="aes128gcm16", tunnels=n,
                                                                   workers=2, underlay_mtu=mtu)))
    labels = {k: l for k, l, _ in variants}
    topos, skipped = build_all(variants, "ntunnels")
    results = {}
    try:
        for i in range(args.runs):
            for key in topos:
                log(f"[ntunnels] {key} run {i + 1}/{args.runs}")
                try:
                    res = perf_multi(topos[key], args.duration)
                except Exception as e:
                    log(f"           failed: {e}")
                    continue
                results.setdefault(key, []).append(res)
                log(f"           {res['gbps']:.2f} Gbit/s aggregate")
    finally:
        for t in topos.values():
            t.close()
    rows = [{"scenario": "ntunnels", "mode": k, "label": labels[k], "runs": len(r),
             "gbps": median_of(r, "gbps"), "gw_cpb": median_of(r, "gw_cpb")} for k, r in results.items()]
    rows += [{"scenario": "ntunnels", "mode": k, "label": l, "skipped": why} for k, (l, why) in skipped.items()]
    return rows


def table_ntunnels(rows):
    lines = ["| tunnels | aggregate Gbit/s (median) | cycles/byte per gateway |", "|---|---|---|"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['label']} | skipped: {r['skipped']} | |")
        else:
            lines.append(f"| {r['label']} | {fmt(r['gbps'])} | {fmt(r['gw_cpb'])} |")
    return "\n".join(lines)


def crypto_ceiling():
    """`openssl speed -evp` at 1500-byte and 64 KB buffers, one core: what
    the CPU can encrypt, the ceiling any ESP path is measured against."""
    rows = []
    for alg in ("aes-128-gcm", "aes-256-gcm", "aes-128-cbc"):
        for size in (1500, 65536):
            out = sh(f"openssl speed -evp {alg} -bytes {size} -seconds 1 -mr 2>/dev/null", check=False)
            bps = next((float(line.rsplit(":", 1)[1]) for line in out.splitlines() if line.startswith("+F:")), None)
            rows.append({"alg": alg, "bytes": size, "gbit_s": bps * 8 / 1e9 if bps else None})
    return rows


def gateway_pids_of(topo):
    if hasattr(topo, "gateway_pids"):
        return topo.gateway_pids()
    return [p for p in [topo.gateway_pid()] if p]


def quiesce(topos, current=None):
    """Freezes (SIGSTOP) the gateways of every contender that spins when
    idle (`busy_poll` true: vecgate with busy_poll, testpmd) but `current`,
    and thaws `current`'s: all of a scenario's topologies live at once, and
    a process that never sleeps would take a CPU from whichever contender
    is being measured. `current=None` thaws them all."""
    import signal
    for t in topos.values():
        if getattr(t, "busy_poll", False):
            sig = signal.SIGCONT if t is current or current is None else signal.SIGSTOP
            for p in gateway_pids_of(t):
                try:
                    os.kill(p, sig)
                except ProcessLookupError:
                    pass


def by_carrier(runs):
    """{carrier CPU: (median Gbit/s, median gateway cycles/byte, runs)}."""
    out = {}
    for cpu in sorted({r.get("carrier_cpu") for r in runs if r.get("carrier_cpu") is not None}):
        rs = [r for r in runs if r.get("carrier_cpu") == cpu]
        out[cpu] = (median_of(rs, "gbps"), median_of(rs, "gw_cpb"), len(rs))
    return out


def median_of(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else None


# ---------------------------------------------------------------- scenarios

def scenario_router(args):
    """Issue 3: kernel forwarding vs vecgate, 1 and 8 TCP streams; issue
    17: next to the I/O floor (vecgate-floor on the same AF_PACKET path)."""
    modes = ["direct", "kernel", "vecgate"] + (["floor"] if floor_built() else [])
    topos = {}
    results = {}
    try:
        for m in modes:
            log(f"[router] setting up {m}")
            topos[m] = Router(m, workers=args.workers)
        for streams in (1, 8):
            for i in range(args.runs):
                for m in modes:
                    log(f"[router] {m:8s} {streams} stream(s) run {i + 1}/{args.runs}")
                    res = perf_run(topos[m], streams, args.duration)
                    results.setdefault((m, streams), []).append(res)
                    log(f"           {res['gbps']:.2f} Gbit/s")
    finally:
        for t in topos.values():
            t.close()
    rows = []
    for (m, streams), runs in sorted(results.items(), key=lambda kv: (kv[0][1], modes.index(kv[0][0]))):
        rows.append({"scenario": "router", "mode": m, "streams": streams, "runs": len(runs),
                     "gbps": median_of(runs, "gbps"), "path_cpb": median_of(runs, "path_cpb"),
                     "gw_cpb": median_of(runs, "gw_cpb"), "retrans": median_of(runs, "retrans"),
                     "all_gbps": [r["gbps"] for r in runs], "runs_text": runs_with_cpu(runs),
                     "by_cpu": by_carrier(runs)})
    # Cost of the hop: path minus the direct-veth path at the same stream count.
    for r in rows:
        base = next((x for x in rows if x["mode"] == "direct" and x["streams"] == r["streams"]), None)
        if base and r["path_cpb"] is not None and base["path_cpb"] is not None and r["mode"] != "direct":
            r["hop_cpb"] = r["path_cpb"] - base["path_cpb"]
    return rows


def floor_built():
    import floor_topo
    if not os.path.exists(floor_topo.FLOOR):
        log(f"bench: {floor_topo.FLOOR} missing (`make floor`): no I/O-floor rows")
        return False
    return True


def scenario_smallpkt(args):
    """UDP packets per second through the router: 64-byte and 1514-byte
    frames (18 and 1472 bytes of UDP payload), kernel forwarding vs vecgate."""
    modes = ["kernel", "vecgate"] + (["vecgate-xdp"] if args.xdp else []) + (
        (["floor"] + (["floor-xdp"] if args.xdp else [])) if floor_built() else [])
    topos, results = {}, {}
    try:
        for m in modes:
            log(f"[smallpkt] setting up {m}")
            if m.endswith("-xdp"):
                topos[m] = Router(m[:-4], workers=args.workers, driver="af_xdp")
            else:
                topos[m] = Router(m, workers=args.workers)
        for frame, payload in ((64, 18), (1514, 1472)):
            for i in range(args.runs):
                for m in modes:
                    log(f"[smallpkt] {m:8s} {frame} B frames run {i + 1}/{args.runs}")
                    res = perf_run(topos[m], 1, args.duration, udp=True, io_size=payload)
                    results.setdefault((m, frame), []).append(res)
                    log(f"           {res['pps'] or 0:.0f} pkt/s received, loss {res['loss_pct']}%")
    finally:
        for t in topos.values():
            t.close()
    rows = []
    for (m, frame), runs in sorted(results.items(), key=lambda kv: (kv[0][1], modes.index(kv[0][0]))):
        rows.append({"scenario": "smallpkt", "mode": m, "frame": frame, "runs": len(runs),
                     "pps": median_of(runs, "pps"), "gbps": median_of(runs, "gbps"),
                     "loss_pct": median_of(runs, "loss_pct"), "path_cpb": median_of(runs, "path_cpb"),
                     "gw_cpb": median_of(runs, "gw_cpb")})
    return rows


def udp_sink(topo):
    """h2 drops the generators' UDP at its veth's ingress hook (nftables
    netdev chain; ICMP, so the setup's ping, still passes), after the veth
    counted it in `rx_packets`. Without it every frame climbs h2's IP stack
    to a closed port and its ICMP error (route lookups per frame), work the
    kernel does in the context of whoever transmits into h2's veth: the
    hop's cost figures measured h2 more than the hop."""
    topo.h2.sh("nft -f - <<EOF\ntable netdev vgsink {\n chain in {\n"
               "  type filter hook ingress device eth0 priority 0; policy accept;\n"
               "  ip protocol udp drop\n }\n}\nEOF")


def system_busy_seconds():
    """CPU time all CPUs spent busy (not idle, not waiting for I/O), from
    /proc/stat: a hop without a process (kernel forwarding) is costed here."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / CLK_TCK


def pps_run(topo, frame, duration, generator="floor"):
    """One run of a generator pinned like every sender from h1 through the
    hop: the AF_XDP generator `vecgate-floor generate`, or DPDK testpmd
    `txonly` (`generator="testpmd"`). Frames/s counted by h2's veth (the
    referee), the gateway's cycles per received frame (its process's CPU
    time) and the path's (every CPU's busy time, generator included)."""
    gw_mac = getattr(topo, "gen_dst_mac", None)
    if gw_mac is None:
        import floor_topo
        gw_mac = floor_topo.mac(topo.r, "r-h1")
    pids = [p for p in [topo.gateway_pid()] if p]
    if topo_label(topo) not in PLACEMENTS:
        # The generators run under `taskset -c PINS["sender"]` and end
        # with their run; the referee is h2's veth counter.
        PLACEMENTS[topo_label(topo)] = {
            "sender": PINS["sender"], "receiver": "no process (h2's veth counter)",
            "gateway": " + ".join(cpus_allowed(p) for p in pids) if pids else "no process (kernel datapath)",
            "gateway_procs": [cpus_allowed(p, threads=False) for p in pids]}

    def probe():
        return sum(proc_cpu_seconds(p) for p in pids), system_busy_seconds()
    if generator == "testpmd":
        import testpmd
        g = testpmd.txonly_run(topo, frame, duration, probe)
        (c0, b0), (c1, b1) = g["probe"]
        got, secs = g["received"], g["seconds"]
    else:
        import floor_topo
        p0 = int(topo.h2.sh("cat /sys/class/net/eth0/statistics/rx_packets"))
        c0, b0 = probe()
        out = topo.h1.sh(" ".join(pinned("sender", [floor_topo.FLOOR, "generate", "--if", "eth0", "--dst-mac", gw_mac,
                                                    "--src", "10.1.0.2", "--dst", topo.dst, "--size", str(frame),
                                                    "--seconds", str(duration)])))
        time.sleep(0.2)
        got = int(topo.h2.sh("cat /sys/class/net/eth0/statistics/rx_packets")) - p0
        c1, b1 = probe()
        g = json.loads(out)
        secs = g["seconds"]
    return {"pps": got / secs, "sent_pps": g["sent_pps"] if generator == "testpmd" else g["pps"],
            "gw_cpp": (c1 - c0) * tsc_hz() / got if pids and got else None,
            "path_cpp": (b1 - b0) * tsc_hz() / got if got else None}


def scenario_pps(args):
    """Issue 17 item 5: small packets measured at the gateway, not the
    sender. An AF_XDP generator (`vecgate-floor generate`) sends 60-byte
    (64 with the FCS) and 1514-byte frames from h1 as fast as veth takes
    them; h2's veth counts what crossed the hop: kernel forwarding, vecgate
    (AF_PACKET, AF_XDP) and the I/O floor (AF_PACKET, AF_XDP)."""
    if not floor_built():
        return []
    import testpmd
    tp = args.xdp and testpmd.available()
    if args.xdp and not tp:
        log(f"bench: {testpmd.TESTPMD} missing (scripts/install-deps.sh): no testpmd rows")
    # vecgate-busy: `busy_poll = true`, workers that never sleep (as
    # testpmd's lcore).
    modes = ["kernel", "vecgate", "floor"] + (["vecgate-xdp", "vecgate-busy-xdp", "floor-xdp"] if args.xdp else []) + (
        ["testpmd-xdp"] if tp else [])
    # testpmd txonly as a second generator into the AF_XDP forwarders: is
    # the generator the limit?
    txonly = ["vecgate-xdp", "vecgate-busy-xdp", "testpmd-xdp"] if tp else []
    topos, results = {}, {}
    try:
        for m in modes:
            log(f"[pps] setting up {m}")
            if m.endswith("-xdp"):
                topos[m] = Router(m[:-4], workers=args.workers, driver="af_xdp")
            else:
                topos[m] = Router(m, workers=args.workers)
            udp_sink(topos[m])
        for frame in (60, 1514):
            for i in range(args.runs):
                for m in modes:
                    log(f"[pps] {m:12s} {frame} B frames run {i + 1}/{args.runs}")
                    quiesce(topos, topos[m])
                    try:
                        res = pps_run(topos[m], frame, args.duration)
                    except Exception as e:
                        log(f"           failed: {e}")
                        continue
                    results.setdefault((m, frame), []).append(res)
                    log(f"           {res['pps']:.0f} frames/s received of {res['sent_pps']:.0f}/s sent")
                for m in txonly:
                    log(f"[pps] {m:12s} {frame} B frames run {i + 1}/{args.runs}, testpmd txonly generator")
                    quiesce(topos, topos[m])
                    try:
                        res = pps_run(topos[m], frame, args.duration, generator="testpmd")
                    except Exception as e:
                        log(f"           failed: {e}")
                        continue
                    results.setdefault((m + "+txonly", frame), []).append(res)
                    log(f"           {res['pps']:.0f} frames/s received of {res['sent_pps']:.0f}/s sent")
    finally:
        quiesce(topos)
        for t in topos.values():
            t.close()
    order = modes + [m + "+txonly" for m in txonly]
    return [{"scenario": "pps", "mode": m, "frame": frame, "runs": len(runs), "pps": median_of(runs, "pps"),
             "sent_pps": median_of(runs, "sent_pps"), "gw_cpp": median_of(runs, "gw_cpp"),
             "path_cpp": median_of(runs, "path_cpp"), "all_pps": [r["pps"] for r in runs]}
            for (m, frame), runs in sorted(results.items(), key=lambda kv: (kv[0][1], order.index(kv[0][0])))]


def table_pps(rows):
    lines = ["| path | frame | frames/s received at h2 (median) | runs | generator frames/s sent | gateway cycles per "
             "frame | path cycles per frame (all CPUs) | distance to the floor: frames/s ratio; cycles/frame ratio "
             "| vs testpmd io: frames/s ratio; cycles/frame ratio |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        base = r["mode"].split("+")[0]
        match = "floor-xdp" if base.endswith("-xdp") else "floor"
        fl = next((x for x in rows if x["mode"] == match and x["frame"] == r["frame"]), None)
        dist = f"{floor_ratio(r, fl, 'pps')}; {floor_ratio(r, fl, 'gw_cpp')}" \
            if fl and base.startswith("vecgate") and "+" not in r["mode"] else "—"
        # Against testpmd fed by the same generator.
        tmode = "testpmd-xdp" + r["mode"][len(base):]
        tp = next((x for x in rows if x["mode"] == tmode and x["frame"] == r["frame"]), None)
        vs = f"{floor_ratio(r, tp, 'pps')}; {floor_ratio(r, tp, 'gw_cpp')}; path {floor_ratio(r, tp, 'path_cpp')}" \
            if tp and base.endswith("-xdp") and base != "testpmd-xdp" else "—"
        lines.append(f"| {LABELS[base]}{', testpmd txonly generator' if '+txonly' in r['mode'] else ''} | "
                     f"{r['frame']} B | {fmt(r['pps'], 0)} | "
                     f"{', '.join(fmt(x, 0) for x in r['all_pps'])} | {fmt(r['sent_pps'], 0)} | "
                     f"{fmt(r.get('gw_cpp'), 0)} | {fmt(r.get('path_cpp'), 0)} | {dist} | {vs} |")
    return "\n".join(lines)


IO_SIZES = [1024, 4096, 16384, 65536, 262144]


def scenario_iosize(args):
    """One TCP stream through the router at I/O sizes 1 KB … 256 KB (the
    x-axis of the NVGRE-offload figure): kernel forwarding, vecgate with its
    offloads (super-packets through vnet headers) and vecgate without."""
    variants = [("kernel", {}), ("vecgate", {}), ("vecgate-nooffload", {"offloads": False})]
    topos, results = {}, {}
    try:
        for name, kw in variants:
            log(f"[iosize] setting up {name}")
            topos[name] = Router(name.split("-")[0], workers=args.workers, **kw)
        for size in IO_SIZES:
            for i in range(args.runs):
                for name, _ in variants:
                    log(f"[iosize] {name:18s} {size // 1024:4d} KB run {i + 1}/{args.runs}")
                    res = perf_run(topos[name], 1, args.duration, io_size=size)
                    results.setdefault((name, size), []).append(res)
                    log(f"           {res['gbps']:.2f} Gbit/s")
    finally:
        for t in topos.values():
            t.close()
    return [{"scenario": "iosize", "mode": name, "io_size": size, "runs": len(runs),
             "gbps": median_of(runs, "gbps"), "path_cpb": median_of(runs, "path_cpb"),
             "gw_cpb": median_of(runs, "gw_cpb")}
            for (name, size), runs in sorted(results.items(), key=lambda kv: (kv[0][1], kv[0][0]))]


def veth_rx_bytes(ns, dev):
    """The veth's own receive byte counter inside `ns` (the referee)."""
    return int(ns.sh(f"cat /sys/class/net/{dev}/statistics/rx_bytes").strip())


# Both tools placed the same way: sender on CPU 0, receiver on CPU 1 (on
# this 2-core machine unpinned runs of one tool differ by up to 2x, because
# the scheduler may put both ends on one core or split them).
TOOL_PINS = {role: PINS[role] for role in ("sender", "receiver")}


def tools_run(topo, tool, duration, io_size):
    """One TCP stream h1 -> h2 over the direct veth with `tool`; returns the
    tool's own figure and the veth counter's over the whole run."""
    pin = lambda role: ["taskset", "-c", TOOL_PINS[role]]
    before = veth_rx_bytes(topo.h2, "eth0")
    t0 = time.monotonic()
    if tool == "iperf3":
        srv = topo.h2.popen(pin("receiver") + ["iperf3", "-s", "-1", "-p", "5210"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(200):
            if ":5210" in topo.h2.sh("ss -ltnH"):
                break
            time.sleep(0.05)
        out = topo.h1.sh(" ".join(pin("sender")) + f" iperf3 -c {topo.dst} -p 5210 -t {duration} "
                         f"-l {io_size} -O 1 -J")
        srv.wait(timeout=30)
        j = json.loads(out)
        gbps = j["end"]["sum_received"]["bits_per_second"] / 1e9
        # Omitted intervals are left out of the figure, not of the wire.
        total = sum(i["sum"]["bytes"] for i in j.get("intervals", [])) or j["end"]["sum_received"]["bytes"]
    else:
        rx = topo.h2.popen(pin("receiver") + [VECGATE, "perf", "receive", "-p", "5211", "--json", "-q",
                                              "--timeout", "20"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.3)
        tx = topo.h1.popen(pin("sender") + [VECGATE, "perf", "send", topo.dst, "-p", "5211", "-d",
                                            str(duration), "--warmup", "1", "-l", str(io_size), "--json",
                                            "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        tx.communicate(timeout=duration + 60)
        rxo, _ = rx.communicate(timeout=30)
        r = json.loads(rxo)
        gbps, total = r["throughput_gbps"], r["total_bytes"]
    wall = time.monotonic() - t0
    wire = veth_rx_bytes(topo.h2, "eth0") - before
    return {"gbps": gbps, "total_bytes": total, "wire_bytes": wire, "wall_s": wall}


def scenario_tools(args):
    """iperf3 and `vecgate perf` side by side on the same veth, pinned the
    same way, alternating run by run: how the two instruments compare. The
    tests check `vecgate perf`'s counting against the veth's counter in the
    same run; this row shows how its figure sits next to iperf3's."""
    topo = Router("direct")
    runs = {"iperf3": [], "vecgate-perf": []}
    try:
        for i in range(args.runs):
            for tool in runs:
                log(f"[tools] {tool:12s} run {i + 1}/{args.runs}")
                res = tools_run(topo, tool, args.duration, 131072)
                runs[tool].append(res)
                log(f"           {res['gbps']:.2f} Gbit/s (payload {res['total_bytes']} B, veth {res['wire_bytes']} B)")
    finally:
        topo.close()
    rows = []
    for tool, rs in runs.items():
        rows.append({"scenario": "tools", "mode": tool, "runs": len(rs), "gbps": median_of(rs, "gbps"),
                     "all_gbps": [r["gbps"] for r in rs],
                     "wire_per_payload": statistics.median(r["wire_bytes"] / max(r["total_bytes"], 1) for r in rs)})
    ratios = [v["gbps"] / i["gbps"] for v, i in zip(runs["vecgate-perf"], runs["iperf3"]) if i["gbps"]]
    if ratios:
        rows.append({"scenario": "tools", "mode": "ratio", "ratio": statistics.median(ratios), "all": ratios})
    return rows


def table_tools(rows):
    lines = ["| instrument (1 TCP stream, 128 KiB writes, sender CPU 0, receiver CPU 1) | Gbit/s (median) | runs | "
             "veth wire bytes / payload bytes |", "|---|---|---|---|"]
    for r in rows:
        if r["mode"] == "ratio":
            continue
        lines.append(f"| {r['mode']} | {fmt(r['gbps'])} | {', '.join(fmt(g) for g in r['all_gbps'])} | "
                     f"{fmt(r['wire_per_payload'], 4)} |")
    ratio = next((r for r in rows if r["mode"] == "ratio"), None)
    if ratio:
        lines.append(f"| vecgate perf / iperf3, median of the run pairs | {fmt(ratio['ratio'])}× | "
                     f"{', '.join(fmt(x) for x in ratio['all'])} | |")
    return "\n".join(lines)


def table_smallpkt(rows):
    lines = ["| path | frame size | packets/s received (median) | Gbit/s | loss % | gateway process cycles/byte "
             "| distance to the floor: packets/s ratio |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        match = "floor-xdp" if r["mode"].endswith("-xdp") else "floor"
        fl = next((x for x in rows if x["mode"] == match and x["frame"] == r["frame"]), None)
        dist = floor_ratio(r, fl, "pps") if fl and r["mode"].startswith("vecgate") else "—"
        lines.append(f"| {LABELS[r['mode']]} | {r['frame']} B | {fmt(r['pps'], 0)} | {fmt(r['gbps'])} | "
                     f"{fmt(r['loss_pct'], 1)} | {fmt(r.get('gw_cpb'))} | {dist} |")
    return "\n".join(lines)


IOLABELS = {"kernel": "Linux kernel forwarding", "vecgate": "vecgate, offloads on",
            "vecgate-nooffload": "vecgate, offloads off"}


def table_iosize(rows):
    names = [n for n in IOLABELS if any(r["mode"] == n for r in rows)]
    lines = ["| I/O size | " + " | ".join(f"{IOLABELS[n]} Gbit/s" for n in names) + " |",
             "|---|" + "---|" * len(names)]
    for size in IO_SIZES:
        cells = []
        for n in names:
            r = next((x for x in rows if x["mode"] == n and x["io_size"] == size), None)
            cells.append(fmt(r["gbps"]) if r else "—")
        lines.append(f"| {size // 1024} KB | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_iosize(rows, path_base):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    for n, label in IOLABELS.items():
        pts = sorted((r["io_size"], r["gbps"] or 0) for r in rows if r["mode"] == n)
        if pts:
            ax.plot([p[0] / 1024 for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks([s / 1024 for s in IO_SIZES])
    ax.set_xticklabels([f"{s // 1024}K" for s in IO_SIZES])
    ax.set_xlabel("application I/O size (bytes per send)")
    ax.set_ylabel("Gbit/s (median)")
    ax.set_title("One TCP stream through one hop, by I/O size")
    ax.legend()
    fig.tight_layout()
    outs = []
    for ext in ("svg", "png"):
        fig.savefig(f"{path_base}.{ext}")
        outs.append(f"{path_base}.{ext}")
    return outs


def tunnel_contenders():
    """(key, label, constructor) of every site-to-site contender, vecgate and
    third-party peers; a peer that cannot be built is reported as skipped."""
    import peers
    import vecgate_topo as vt
    c = [("kernel-plain", "Linux kernel forwarding, no tunnel (ceiling)", lambda: peers.KernelPlain())]
    for k in ("gre", "nvgre", "vxlan"):
        c.append((f"vecgate-{k}", vt.LABELS[k] + ", 1500 underlay", lambda k=k: vt.VecgateTunnel(k)))
        c.append((f"vecgate-{k}-64k", vt.LABELS[k] + ", 64K-MTU underlay",
                  lambda k=k: vt.VecgateTunnel(k, underlay_mtu=65535)))
    for alg in ESP_ALGS:
        c.append((f"vecgate-esp-{alg}", f"vecgate ESP {alg}, 1500 underlay",
                  lambda alg=alg: vt.VecgateTunnel("esp", algorithm=alg)))
        c.append((f"vecgate-esp-{alg}-64k", f"vecgate ESP {alg}, 64K-MTU underlay",
                  lambda alg=alg: vt.VecgateTunnel("esp", algorithm=alg, underlay_mtu=65535)))
    if floor_built():
        import floor_topo
        c.append(("floor-gre-64k", "I/O floor GRE twin, 64K-MTU underlay", lambda: floor_topo.FloorTunnel(False)))
        c.append(("floor-gre", "I/O floor GRE twin, per-packet (hosts MTU 1476, TSO off), 1500 underlay",
                  lambda: floor_topo.FloorTunnel(True)))
        c.append(("floor-gre-xdp", "I/O floor GRE twin, per-packet (hosts MTU 1476), 1500 underlay, AF_XDP",
                  lambda: floor_topo.FloorTunnel(True, driver="af_xdp")))
    # The datacenter underlay (issue 17 item 6): jumbo frames between the
    # gateways, as the Windows Server 2019 gateways were measured (4088).
    for mtu in JUMBO_MTUS:
        c.append((f"kernel-plain-{mtu}", f"Linux kernel forwarding, no tunnel, {mtu}-byte underlay (ceiling)",
                  lambda mtu=mtu: peers.KernelPlain(underlay_mtu=mtu)))
        for k in ("gre", "nvgre", "vxlan"):
            c.append((f"vecgate-{k}-{mtu}", vt.LABELS[k] + f", {mtu}-byte underlay",
                      lambda k=k, mtu=mtu: vt.VecgateTunnel(k, underlay_mtu=mtu)))
        c.append((f"vecgate-esp-aes128gcm16-{mtu}", f"vecgate ESP aes128gcm16, {mtu}-byte underlay",
                  lambda mtu=mtu: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_mtu=mtu)))
    c.append(("vecgate-esp-aes128gcm16-natt", "vecgate ESP aes128gcm16, NAT-T (ESP in UDP 4500), 1500 underlay",
              lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", nat_t=True)))
    c.append(("vecgate-gre-xdp", vt.LABELS["gre"] + ", 1500 AF_XDP underlay",
              lambda: vt.VecgateTunnel("gre", underlay_driver="af_xdp")))
    c.append(("vecgate-esp-aes128gcm16-xdp", "vecgate ESP aes128gcm16, 1500 AF_XDP underlay",
              lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_driver="af_xdp")))
    # AF_XDP multi-buffer: a jumbo underlay over AF_XDP (frames over one
    # UMEM frame cross as descriptor chains).
    for mtu in JUMBO_MTUS:
        c.append((f"vecgate-gre-{mtu}-xdp", vt.LABELS["gre"] + f", {mtu}-byte AF_XDP underlay",
                  lambda mtu=mtu: vt.VecgateTunnel("gre", underlay_mtu=mtu, underlay_driver="af_xdp")))
        c.append((f"vecgate-esp-aes128gcm16-{mtu}-xdp", f"vecgate ESP aes128gcm16, {mtu}-byte AF_XDP underlay",
                  lambda mtu=mtu: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_mtu=mtu,
                                                   underlay_driver="af_xdp")))
    # Workers that never sleep (`busy_poll`), as testpmd's lcore.
    c.append(("vecgate-gre-xdp-busy", vt.LABELS["gre"] + ", 1500 AF_XDP underlay, busy_poll",
              lambda: vt.VecgateTunnel("gre", underlay_driver="af_xdp", busy_poll=True)))
    c.append(("vecgate-esp-aes128gcm16-xdp-busy", "vecgate ESP aes128gcm16, 1500 AF_XDP underlay, busy_poll",
              lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_driver="af_xdp", busy_poll=True)))
    c += [("kernel-vxlan", "Linux kernel VXLAN", lambda: peers.KernelVxlan()),
          ("ovs-gre", "Open vSwitch userspace GRE", lambda: peers.OvsGre()),
          ("ovs-vxlan", "Open vSwitch userspace VXLAN", lambda: peers.OvsVxlan())]
    for alg in ESP_ALGS:
        c.append((f"strongswan-{alg}", f"strongSwan kernel-libipsec {alg}",
                  lambda alg=alg: peers.StrongswanEsp(proposal=alg)))
    return c


ESP_ALGS = ["aes128gcm16", "aes256gcm16", "aes128-sha1"]
JUMBO_MTUS = (4088, 9000)


def build_all(contenders, tag):
    topos, skipped = {}, {}
    for key, label, make in contenders:
        log(f"[{tag}] setting up {label}")
        try:
            topos[key] = make()
        except Exception as e:  # reported, never silently dropped
            skipped[key] = (label, str(e).strip().splitlines()[0][:200] if str(e).strip() else repr(e))
            log(f"[{tag}] SKIPPED {label}: {skipped[key][1]}")
    return topos, skipped


def scenario_tunnels(args):
    """Issue 4's table: no tunnel vs every tunnel kind, vecgate vs peers,
    1 and 8 TCP streams, Gbit/s and cycles/byte per gateway."""
    contenders = [c for c in tunnel_contenders() if not args.only or c[0] in args.only.split(",")]
    labels = {k: l for k, l, _ in contenders}
    topos, skipped = build_all(contenders, "tunnels")
    results = {}
    try:
        for streams in args.streams:
            for i in range(args.runs):
                for key in topos:
                    log(f"[tunnels] {key:14s} {streams} stream(s) run {i + 1}/{args.runs}")
                    quiesce(topos, topos[key])
                    try:
                        res = perf_run(topos[key], streams, args.duration)
                    except Exception as e:
                        log(f"           failed: {e}")
                        continue
                    results.setdefault((key, streams), []).append(res)
                    log(f"           {res['gbps']:.2f} Gbit/s")
    finally:
        quiesce(topos)
        for t in topos.values():
            t.close()
    rows = []
    for (key, streams), runs in results.items():
        rows.append({"scenario": "tunnels", "mode": key, "label": labels[key], "streams": streams,
                     "runs": len(runs), "gbps": median_of(runs, "gbps"), "all_gbps": [r["gbps"] for r in runs],
                     "path_cpb": median_of(runs, "path_cpb"),
                     # two gateways: per gateway is half of both
                     "gw_cpb": (median_of(runs, "gw_cpb") / 2) if median_of(runs, "gw_cpb") is not None else None,
                     "retrans": median_of(runs, "retrans")})
    for key, (label, why) in skipped.items():
        rows.append({"scenario": "tunnels", "mode": key, "label": label, "skipped": why})
    return rows


def scenario_rsc(args):
    """RSC on vs off at the receiving gateway (vecgate GRE pair, one TCP
    stream): the receiver's CPU %, cycles/byte and throughput, as Hyper-V's
    RSC table reports them."""
    import vecgate_topo as vt
    variants = [("rsc-off", lambda: vt.VecgateTunnel("gre", rsc=False)),
                ("rsc-on", lambda: vt.VecgateTunnel("gre", rsc=True))]
    topos, skipped = build_all([(k, k, m) for k, m in variants], "rsc")
    results = {}
    try:
        for i in range(args.runs):
            for key in topos:
                log(f"[rsc] {key} run {i + 1}/{args.runs}")
                res = perf_run(topos[key], 1, args.duration)
                results.setdefault(key, []).append(res)
                log(f"           {res['gbps']:.2f} Gbit/s, receiver {res.get('rx_cpu_pct') or 0:.1f} % CPU")
    finally:
        for t in topos.values():
            t.close()
    rows = []
    for key, runs in results.items():
        rows.append({"scenario": "rsc", "mode": key, "runs": len(runs), "gbps": median_of(runs, "gbps"),
                     "rx_cpu_pct": median_of(runs, "rx_cpu_pct"), "rx_cpb": median_of(runs, "rx_cpb"),
                     "path_cpb": median_of(runs, "path_cpb"),
                     "gw_cpb": (median_of(runs, "gw_cpb") / 2) if median_of(runs, "gw_cpb") is not None else None})
    for key, (label, why) in skipped.items():
        rows.append({"scenario": "rsc", "mode": key, "skipped": why})
    return rows


def table_tunnels(rows):
    lines = ["| path | streams | Gbit/s (median) | runs | cycles/byte per gateway | path cycles/byte | TCP retransmits "
             "| distance to the matching floor: Gbit/s ratio; cycles/byte ratio |",
             "|---|---|---|---|---|---|---|---|"]
    live = [r for r in rows if not r.get("skipped")]

    def floor_of(r):
        """A vecgate row's floor: the GRE twin over the same underlay (the
        64K twin for 64K-MTU rows, the per-packet twin for 1500 rows)."""
        if not r["mode"].startswith("vecgate-") or any(f"-{m}" in r["mode"] for m in JUMBO_MTUS):
            return None
        key = "floor-gre-64k" if r["mode"].endswith("-64k") else \
            "floor-gre-xdp" if r["mode"].endswith(("-xdp", "-xdp-busy")) else "floor-gre"
        return next((x for x in live if x["mode"] == key and x["streams"] == r["streams"]), None)
    for r in sorted(live, key=lambda r: (r["streams"], r["mode"])):
        fl = floor_of(r)
        dist = f"{floor_ratio(r, fl)}; {floor_ratio(r, fl, 'gw_cpb')}" if fl else "—"
        lines.append(f"| {r['label']} | {r['streams']} | {fmt(r['gbps'])} | {', '.join(fmt(x) for x in r['all_gbps'])} | "
                     f"{fmt(r.get('gw_cpb'))} | {fmt(r['path_cpb'])} | {fmt(r['retrans'], 0)} | {dist} |")
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['label']} | — | skipped: {r['skipped']} | | | | | |")
    notes = []
    for s in (1, 8):
        def g(key):
            return next((x["gbps"] for x in live if x["mode"] == key and x["streams"] == s), None)
        ovs, sw = g("ovs-gre"), g("strongswan-aes128gcm16")
        for suffix, what in ((("", "1500 underlay"), ("-64k", "64K-MTU underlay"))
                             + tuple((f"-{m}", f"{m}-byte underlay") for m in JUMBO_MTUS)):
            # The ceiling: kernel forwarding over the same underlay MTU where
            # it was measured, else over the 1500-byte one.
            ceil = g("kernel-plain" + suffix if suffix in tuple(f"-{m}" for m in JUMBO_MTUS) else "kernel-plain")
            gre, esp = g("vecgate-gre" + suffix), g("vecgate-esp-aes128gcm16" + suffix)
            if ceil and gre:
                notes.append(f"- {s} stream(s), {what}: vecgate GRE = **{gre / ceil:.2f}×** the no-tunnel kernel "
                             "ceiling" + (f", **{gre / ovs:.1f}×** Open vSwitch userspace GRE" if ovs else ""))
            if esp and gre:
                notes.append(f"- {s} stream(s), {what}: vecgate ESP AES-GCM-128 = **{esp / gre:.2f}×** vecgate GRE"
                             + (f", **{esp / sw:.1f}×** strongSwan" if sw else ""))
    return "\n".join(lines + [""] + notes)


def table_rsc(rows):
    live = {r["mode"]: r for r in rows if not r.get("skipped")}
    lines = ["| receiving gateway | Avg CPU % (receiver process) | receiver cycles/byte | gateway cycles/byte | Gbit/s |",
             "|---|---|---|---|---|"]
    for key, label in (("rsc-off", "RSC off"), ("rsc-on", "RSC on")):
        r = live.get(key)
        if r:
            lines.append(f"| {label} | {fmt(r['rx_cpu_pct'], 1)} | {fmt(r['rx_cpb'])} | {fmt(r.get('gw_cpb'))} | {fmt(r['gbps'])} |")
    on, off = live.get("rsc-on"), live.get("rsc-off")
    if on and off:
        def pct(a, b):
            return "—" if a is None or b in (None, 0) else f"{(a - b) / b * 100:+.0f} %"
        lines.append(f"| **improvement** | {pct(on['rx_cpu_pct'], off['rx_cpu_pct'])} | {pct(on['rx_cpb'], off['rx_cpb'])} | "
                     f"{pct(on.get('gw_cpb'), off.get('gw_cpb'))} | {pct(on['gbps'], off['gbps'])} |")
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| {r['mode']} | skipped: {r['skipped']} | | | |")
    return "\n".join(lines)


def scenario_ike(args):
    """Time to establish 1 and 100 IKEv2 tunnels (IKE SA + child SA)
    between vecgate and strongSwan, set-ups per second with a PSK, ECDSA
    P-256 and RSA-2048 certificates against charon and against vecgate,
    and ESP throughput with IKE-derived keys next to static keys
    (bench/ike_bench.py)."""
    import ike_bench
    rows = []
    log(f"[ike] set-up rate by authentication, {IKE_AUTH_TUNNELS} tunnels, charon and vecgate peers")
    for r in ike_bench.measure_auth(IKE_AUTH_TUNNELS):
        rows.append({"scenario": "ike", "kind": "auth", **{k: r.get(k) for k in (
            "tunnels", "auth", "peer", "establish_s", "setups_per_s", "peer_methods", "skipped")}})
    for n in (1, 100):
        log(f"[ike] establishing {n} tunnel(s) with charon")
        try:
            r = ike_bench.measure(n)
            rows.append({"scenario": "ike", "kind": "establish", "tunnels": n,
                         "establish_s": r.get("establish_s"), "per_tunnel_ms": r.get("per_tunnel_ms"),
                         "charon_installed": r.get("charon_installed")})
        except Exception as e:
            rows.append({"scenario": "ike", "kind": "establish", "tunnels": n,
                         "skipped": str(e).strip().splitlines()[0][:200]})
    log("[ike] throughput: static keys vs IKE keys")
    try:
        t = ike_bench.throughput(runs=args.runs, duration=args.duration)
        rows.append({"scenario": "ike", "kind": "throughput", **t})
    except Exception as e:
        rows.append({"scenario": "ike", "kind": "throughput", "skipped": str(e).strip().splitlines()[0][:200]})
    return rows


CHARON_ALGS = ["aes128gcm16", "aes256gcm16", "aes128-sha1", "aes256-sha256"]


def tcp_segments(ns):
    """(Tcp OutSegs, RetransSegs) of a namespace (/proc/net/snmp)."""
    lines = [l.split()[1:] for l in ns.sh("cat /proc/net/snmp").splitlines() if l.startswith("Tcp:")]
    t = dict(zip(lines[0], (int(x) for x in lines[1])))
    return t.get("OutSegs", 0), t.get("RetransSegs", 0)


def scenario_charon(args):
    """vecgate → strongSwan charon per ESP cipher (ESP in UDP: Debian's
    libipsec always encapsulates), next to charon ↔ charon with the same
    cipher, runs interleaved: throughput, the sender's TCP retransmits as
    a share of its segments, and the ESP packets vecgate counted as sealed
    against the UDP datagrams that reached charon's sockets (and how many
    of those its sockets dropped, receive buffer full)."""
    import peers
    import vecgate_topo as vt
    contenders = []
    for alg in CHARON_ALGS:
        contenders.append((f"vecgate-charon-{alg}", f"vecgate → charon {alg}",
                           lambda alg=alg: vt.VecgateCharon(proposal=alg)))
        contenders.append((f"charon-charon-{alg}", f"charon ↔ charon {alg}",
                           lambda alg=alg: peers.StrongswanEsp(proposal=alg)))
    contenders = [c for c in contenders if not args.only or c[0] in args.only.split(",")]
    labels = {k: l for k, l, _ in contenders}
    topos, skipped = build_all(contenders, "charon")
    results = {}
    try:
        for i in range(args.runs):
            for key, topo in topos.items():
                log(f"[charon] {key:28s} run {i + 1}/{args.runs}")
                quiesce(topos, topo)
                c0 = topo.counters() if hasattr(topo, "counters") else None
                s0 = tcp_segments(topo.h1)
                try:
                    res = perf_run(topo, 1, args.duration)
                except Exception as e:
                    log(f"           failed: {e}")
                    continue
                s1 = tcp_segments(topo.h1)
                res["segments"], res["retrans_segs"] = s1[0] - s0[0], s1[1] - s0[1]
                res["retrans_pct"] = 100.0 * res["retrans_segs"] / max(res["segments"], 1)
                if c0:
                    c1 = topo.counters()
                    res["sealed"], res["at_charon"], res["charon_drops"] = (b - a for a, b in zip(c0, c1))
                results.setdefault(key, []).append(res)
                log(f"           {res['gbps']:.2f} Gbit/s, {res['retrans_pct']:.2f} % retransmitted"
                    + (f", {res['sealed']} ESP sealed, {res['at_charon']} at charon ({res['charon_drops']} "
                       "dropped by its socket)" if c0 else ""))
    finally:
        quiesce(topos)
        for t in topos.values():
            t.close()
    rows = []
    for key, runs in results.items():
        row = {"scenario": "charon", "mode": key, "label": labels[key], "runs": len(runs),
               "gbps": median_of(runs, "gbps"), "all_gbps": [r["gbps"] for r in runs],
               "retrans_pct": median_of(runs, "retrans_pct")}
        if "sealed" in runs[0]:
            row["sealed"] = sum(r["sealed"] for r in runs)
            row["at_charon"] = sum(r["at_charon"] for r in runs)
            row["charon_drops"] = sum(r["charon_drops"] for r in runs)
        rows.append(row)
    for key, (label, why) in skipped.items():
        rows.append({"scenario": "charon", "mode": key, "label": label, "skipped": why})
    return rows


def table_charon(rows):
    lines = ["| cipher | vecgate → charon Gbit/s | charon ↔ charon Gbit/s | ratio | TCP retransmits, vecgate → charon "
             "(charon ↔ charon) | ESP packets vecgate sealed / datagrams at charon's sockets | of which charon's "
             "sockets dropped |", "|---|---|---|---|---|---|---|"]
    by = {r["mode"]: r for r in rows}
    for alg in CHARON_ALGS:
        v, c = by.get(f"vecgate-charon-{alg}"), by.get(f"charon-charon-{alg}")
        if not v and not c:
            continue
        if (v and v.get("skipped")) or (c and c.get("skipped")):
            why = (v or {}).get("skipped") or (c or {}).get("skipped")
            lines.append(f"| {alg} | skipped: {why} | | | | | |")
            continue
        vg, cg = (v or {}).get("gbps"), (c or {}).get("gbps")
        ratio = f"{vg / cg:.2f}×" if vg and cg else "—"
        counted = (f"{v['sealed']} / {v['at_charon']} ({v['at_charon'] / max(v['sealed'], 1):.3f}×)"
                   if v and "sealed" in v else "—")
        lines.append(f"| {alg} | {fmt(vg)} | {fmt(cg)} | {ratio} | {fmt((v or {}).get('retrans_pct'))} % "
                     f"({fmt((c or {}).get('retrans_pct'))} %) | {counted} | {(v or {}).get('charon_drops', '—')} |")
    return "\n".join(lines)


# Tunnels per set-up rate run of the IKE scenario (one per authentication
# and peer).
IKE_AUTH_TUNNELS = 20


def table_ike(rows):
    lines = ["| measurement | result |", "|---|---|"]
    auth = [r for r in rows if r["kind"] == "auth"]
    for r in rows:
        if r["kind"] == "auth":
            continue
        if r["kind"] == "establish":
            what = f"establish {r['tunnels']} tunnel(s) vecgate → strongSwan (IKE SA + child SA each)"
            res = f"skipped: {r['skipped']}" if r.get("skipped") else \
                f"{fmt(r['establish_s'])} s ({fmt(r['per_tunnel_ms'], 1)} ms per tunnel)"
        else:
            what = "ESP aes128gcm16 throughput, vecgate ↔ vecgate, 1 stream: IKE keys vs static keys"
            res = f"skipped: {r['skipped']}" if r.get("skipped") else \
                f"{fmt(r['ike_gbps'])} vs {fmt(r['static_gbps'])} Gbit/s (ratio {fmt(r['ratio'], 3)})"
        lines.append(f"| {what} | {res} |")
    if auth:
        lines += ["", f"IKE set-ups per second ({auth[0]['tunnels']} tunnels, IKE SA + child SA each, "
                  "both sides authenticating alike; one run, side by side):", "",
                  "| authentication | vecgate → strongSwan | vecgate → vecgate |", "|---|---|---|"]
        for a in dict.fromkeys(r["auth"] for r in auth):
            cells = []
            for peer in ("charon", "vecgate"):
                r = next((x for x in auth if x["auth"] == a and x["peer"] == peer), None)
                cells.append("—" if r is None else f"skipped: {r['skipped']}" if r.get("skipped") else
                             f"{fmt(r['setups_per_s'], 1)}/s ({fmt(r['establish_s'])} s)")
            lines.append(f"| {a} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def scenario_fpm(args):
    """Issue 18: 100 000 BGP routes through FRR's zebra into vecgate's FIB
    (FPM) next to the same zebra installing them into the kernel, in one run
    (bench/fpm_bench.py)."""
    import fpm_bench
    log("[fpm] 100000 routes: peer announcement -> vecgate FIB / kernel table")
    try:
        return [{"scenario": "fpm", **fpm_bench.measure(100_000)}]
    except Exception as e:
        return [{"scenario": "fpm", "skipped": str(e).strip().splitlines()[0][:200]}]


def table_fpm(rows):
    lines = ["| measurement | vecgate FIB (FPM) | Linux kernel table (zebra) |", "|---|---|---|"]
    for r in rows:
        if r.get("skipped"):
            lines.append(f"| fpm | skipped: {r['skipped']} | |")
            continue
        n = r["routes"]
        lines.append(f"| {n} routes announced → all installed | {fmt(r['announce_vecgate_s'])} s | "
                     f"{fmt(r['announce_kernel_s'])} s |")
        lines.append(f"| {n} routes withdrawn → all removed | {fmt(r['withdraw_vecgate_s'])} s | "
                     f"{fmt(r['withdraw_kernel_s'])} s |")
        lines.append(f"| one more route with {n} installed → installed | {fmt(r.get('one_more_vecgate_s'), 3)} s | "
                     f"{fmt(r.get('one_more_kernel_s'), 3)} s |")
        lines.append(f"| memory | {fmt(r['bytes_per_route'], 0)} B per route (vecgate RSS "
                     f"{fmt(r['vecgate_rss_mb'], 1)} MB) | zebra {fmt(r['zebra_rss_mb'], 1)} MB, "
                     f"bgpd {fmt(r['bgpd_rss_mb'], 1)} MB |")
        if r.get("one_more_fpm_to_fib_ms") is not None:
            lines.append(f"| one route change: FPM frame arrival → FIB publish (median; max of the run) | "
                         f"{fmt(r['one_more_fpm_to_fib_ms'], 2)} ms; {fmt(r.get('fpm_to_fib_max_ms'), 1)} ms | |")
        lines.append(f"| table publishes (FIB patches) / install failures | {r['publishes']} "
                     f"({r.get('patches', '-')}) / {r['failures']} | |")
    return "\n".join(lines)


SCENARIOS = {"router": scenario_router, "smallpkt": scenario_smallpkt, "pps": scenario_pps, "iosize": scenario_iosize,
             "tunnels": scenario_tunnels, "rsc": scenario_rsc, "ntunnels": scenario_ntunnels,
             "ike": scenario_ike, "tools": scenario_tools, "fpm": scenario_fpm, "charon": scenario_charon}

LABELS = {"direct": "direct veth (no hop)", "kernel": "Linux kernel forwarding", "vecgate": "vecgate (AF_PACKET)",
          "vecgate-xdp": "vecgate (AF_XDP)", "floor": "I/O floor (vecgate-floor, AF_PACKET)",
          "floor-xdp": "I/O floor (vecgate-floor, AF_XDP)", "testpmd-xdp": "DPDK testpmd io (net_af_xdp)",
          "vecgate-busy-xdp": "vecgate (AF_XDP, busy_poll)"}


def floor_ratio(v, f, key="gbps"):
    """`v[key] / f[key]` formatted, or "—"."""
    if not v or not f or v.get(key) is None or not f.get(key):
        return "—"
    return f"{v[key] / f[key]:.2f}×"


def fmt(v, nd=2):
    return "—" if v is None else f"{v:.{nd}f}"


def table_router(rows):
    lines = ["| path | streams | Gbit/s (median) | runs (Gbit/s) | path cycles/byte | hop cycles/byte (path − direct) | gateway process cycles/byte | TCP retransmits | distance to the floor: Gbit/s ratio; gateway cycles/byte ratio |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        fl = next((x for x in rows if x["mode"] == "floor" and x["streams"] == r["streams"]), None)
        dist = f"{floor_ratio(r, fl)}; {floor_ratio(r, fl, 'gw_cpb')}" if fl and r["mode"] != "direct" else "—"
        lines.append(f"| {LABELS[r['mode']]} | {r['streams']} | {fmt(r['gbps'])} | "
                     f"{r.get('runs_text') or ', '.join(fmt(x) for x in r['all_gbps'])} | {fmt(r['path_cpb'])} | "
                     f"{fmt(r.get('hop_cpb'))} | {fmt(r.get('gw_cpb'))} | {fmt(r['retrans'], 0)} | {dist} |")
    ratios = []
    for s in (1, 8):
        k = next((x for x in rows if x["mode"] == "kernel" and x["streams"] == s), None)
        v = next((x for x in rows if x["mode"] == "vecgate" and x["streams"] == s), None)
        fl = next((x for x in rows if x["mode"] == "floor" and x["streams"] == s), None)
        if k and v and k["gbps"]:
            ratios.append(f"- {s} stream(s): vecgate / kernel forwarding throughput = **{v['gbps'] / k['gbps']:.2f}×**"
                          + (f"; hop cycles/byte vecgate {fmt(v.get('hop_cpb'))} vs kernel {fmt(k.get('hop_cpb'))}"
                             if v.get("hop_cpb") is not None and k.get("hop_cpb") is not None else ""))
        if fl and v:
            ratios.append(f"- {s} stream(s): vecgate / I/O floor throughput = **{floor_ratio(v, fl)}**, gateway "
                          f"cycles/byte **{floor_ratio(v, fl, 'gw_cpb')}** the floor's (targets: ≥ 0.9×, ≤ 1.3×)"
                          + (f"; floor / kernel forwarding = {floor_ratio(fl, k)}" if k else ""))
            # Like with like: runs whose flow the worker on the same CPU carried.
            for cpu in sorted(set(v.get("by_cpu", {})) & set(fl.get("by_cpu", {}))):
                (vg, vc, vn), (fg, fc, fn) = v["by_cpu"][cpu], fl["by_cpu"][cpu]
                if len(v["by_cpu"]) > 1 or len(fl["by_cpu"]) > 1:
                    ratios.append(f"  - runs carried on CPU {cpu} ({vn} vecgate, {fn} floor): "
                                  f"{fmt(vg)} vs {fmt(fg)} Gbit/s = {fmt(vg / fg if fg else None)}×, "
                                  f"cycles/byte {fmt(vc / fc if vc and fc else None)}×")
    return "\n".join(lines + [""] + ratios)


def plot_router(rows, path_base):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib missing: no plot")
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    modes = [m for m in ("direct", "kernel", "vecgate", "floor") if any(r["mode"] == m for r in rows)]
    width = 0.8 / len(modes)
    for i, m in enumerate(modes):
        xs, ys = [], []
        for j, s in enumerate((1, 8)):
            r = next((x for x in rows if x["mode"] == m and x["streams"] == s), None)
            if r:
                xs.append(j + i * width)
                ys.append(r["gbps"] or 0)
        ax.bar(xs, ys, width, label=LABELS[m])
    ax.set_xticks([width * (len(modes) - 1) / 2, 1 + width * (len(modes) - 1) / 2])
    ax.set_xticklabels(["1 TCP stream", "8 TCP streams"])
    ax.set_ylabel("Gbit/s (median)")
    ax.set_title("Routing one hop: h1 → router → h2")
    ax.legend()
    fig.tight_layout()
    outs = []
    for ext in ("svg", "png"):
        fig.savefig(f"{path_base}.{ext}")
        outs.append(f"{path_base}.{ext}")
    return outs


def machine_lines(mach):
    """The report's opening: the machine, the CPU flags that matter, and
    memcpy bandwidth measured in this run."""
    lines = [f"Machine: **{mach['cpu']}**, {mach['cores']} cores, kernel {mach['kernel']}, "
             f"TSC {mach['tsc_ghz']} GHz.", "",
             "CPU flags that matter: " + (", ".join(f"`{f}`" for f in mach.get("flags", [])) or "none")
             + (" (absent: " + ", ".join(f"`{f}`" for f in mach["missing_flags"]) + ")"
                if mach.get("missing_flags") else "") + ".", ""]
    m = mach.get("memcpy")
    if m:
        lines.append(f"memcpy, one core, measured at the start of this run (`vecgate-floor memcpy` on CPU "
                     f"{PINS['sender']}): cold **{m['cold_gbs']:.1f} GB/s** (256 MiB buffers), hot "
                     f"**{m['hot_gbs']:.1f} GB/s** (64 KiB). vecgate's cycles/byte follow the cold figure where it "
                     "copies; compare figures of machines through it.")
    else:
        lines.append("memcpy bandwidth: not measured (`vecgate-floor` missing: `make floor`).")
    return lines


def placement_lines():
    """Every contender's CPU placement as the kernel reported it during its
    first run, and whether they all agree."""
    if not PLACEMENTS:
        return []
    if PLACEMENT == "per-site":
        gw = (f"one-gateway topologies' gateway processes CPUs {PINS['gateway']}; two-site topologies per site: "
              f"site A's gateway processes CPU {PINS['sender']}, site B's CPU {PINS['receiver']}, gwB's underlay "
              f"receive steered to CPU {PINS['receiver']} by RPS (`rps_cpus` {site_rps_mask()} on `b-u`; kernel "
              "datapaths too)")
    else:
        gw = f"gateway processes CPUs {PINS['gateway']}"

    def placed_as_intended(procs):
        # Per site, a two-site topology's gateway processes sit on the
        # sender's CPU and the receiver's, both; one gateway on the gateway
        # CPUs as in the shared placement.
        if PLACEMENT == "per-site" and len(procs) > 1:
            return set(procs) == {PINS["sender"], PINS["receiver"]}
        return all(g == PINS["gateway"] for g in procs)

    lines = ["## CPU placement of every contender", "",
             f"Intended: sender CPU {PINS['sender']}, receiver CPU {PINS['receiver']}, {gw} (vecgate and "
             "vecgate-floor pin worker *i* to the *i*-th of their CPUs themselves; kernel datapaths run in softirq "
             "wherever a packet is handed to them). Read back from "
             "/proc/PID/task/*/status (allowed CPUs per thread, × threads).", "",
             "| contender | sender | receiver | gateway threads |", "|---|---|---|---|"]
    for label, p in PLACEMENTS.items():
        lines.append(f"| {label} | {p['sender']} | {p['receiver']} | {p['gateway']} |")
    def cpus(s):
        return {part.split(" ×")[0] for part in s.split("; ")}
    odd = [label for label, p in PLACEMENTS.items()
           if cpus(p["sender"]) != {PINS["sender"]}
           or (cpus(p["receiver"]) != {PINS["receiver"]} and not p["receiver"].startswith("no process"))
           or not placed_as_intended(p["gateway_procs"])]
    lines += ["", "Every contender placed alike." if not odd else
              "**Placed differently from the rest:** " + ", ".join(odd)]
    return lines


def write_doc(mach, args, all_rows, doc):
    """Refreshes the tables of the scenarios this run measured in the
    report (`doc`), between their markers (bench/report.py); the report's
    prose, the method and the readings of each table, is written by hand."""
    import report
    tables = {"machine": "\n".join(machine_lines(mach) + [
        "", f"{args.runs} runs of {args.duration} s per cell (plus 1 s warm-up), medians, contenders interleaved "
        "run by run; " + ("each site of a two-site topology on its own CPU." if PLACEMENT == "per-site"
                          else "every gateway process on the gateway CPUs (the shared placement).")])}
    if PLACEMENTS:
        tables["placement"] = "\n".join(placement_lines())
    for name, table in (("router", table_router), ("smallpkt", table_smallpkt), ("pps", table_pps),
                        ("tunnels", table_tunnels), ("ntunnels", table_ntunnels), ("ike", table_ike),
                        ("charon", table_charon), ("fpm", table_fpm), ("rsc", table_rsc), ("tools", table_tools), ("iosize", table_iosize)):
        if all_rows.get(name):
            tables[name] = table(all_rows[name])
    if "crypto" in all_rows:
        lines = ["| cipher (openssl speed -evp, one core) | 1500 B buffers | 64 KB buffers |", "|---|---|---|"]
        for alg in ("aes-128-gcm", "aes-256-gcm", "aes-128-cbc"):
            cells = [next((fmt(r["gbit_s"]) + " Gbit/s" for r in all_rows["crypto"]
                           if r["alg"] == alg and r["bytes"] == b and r["gbit_s"]), "—") for b in (1500, 65536)]
            lines.append(f"| {alg} | " + " | ".join(cells) + " |")
        tables["crypto"] = "\n".join(lines)
    for name in report.update(doc, tables):
        log(f"bench: {doc} had no block for {name}: appended at the end")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=",".join(SCENARIOS))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--no-xdp", dest="xdp", action="store_false",
                    help="leave out the AF_XDP contender of the small-packet scenario")
    ap.add_argument("--workers", type=int, default=2,
                    help="vecgate workers of the one-hop router (default 2: one per core of this machine)")
    ap.add_argument("--streams", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8],
                    help="TCP stream counts of the tunnels scenario (default 1,8)")
    ap.add_argument("--only", default="", help="tunnels scenario: comma-separated contender keys")
    ap.add_argument("--doc", default=os.path.join(ROOT, "docs", "benchmarks.md"))
    ap.add_argument("--summary", action="store_true", help="print a short table only (the demo)")
    add_placement_arg(ap)
    args = ap.parse_args()
    set_placement(args.placement)
    if os.geteuid() != 0:
        sys.exit("bench: needs root (network namespaces)")
    if not os.path.exists(VECGATE):
        sys.exit(f"bench: {VECGATE} missing: run `cargo build --release -p vecgate` (make bench does)")
    os.makedirs(OUT, exist_ok=True)
    mach = machine()
    print("\n".join(machine_lines(mach)) + "\n", flush=True)
    all_rows = {}
    for name in args.scenarios.split(","):
        all_rows[name] = SCENARIOS[name](args)
    if not args.summary and shutil.which("openssl"):
        all_rows["crypto"] = crypto_ceiling()
    with open(os.path.join(OUT, "results.json"), "w") as f:
        json.dump({"machine": mach, "rows": all_rows, "placement": PLACEMENTS}, f, indent=1)
    for name, table in (("router", table_router), ("smallpkt", table_smallpkt), ("pps", table_pps), ("iosize", table_iosize),
                        ("tunnels", table_tunnels), ("rsc", table_rsc), ("ntunnels", table_ntunnels),
                        ("ike", table_ike), ("charon", table_charon), ("tools", table_tools), ("fpm", table_fpm)):
        if name in all_rows:
            print(table(all_rows[name]))
            print()
    print("\n".join(placement_lines()))
    if not args.summary:
        docdir = os.path.dirname(args.doc)
        if "router" in all_rows:
            plot_router(all_rows["router"], os.path.join(docdir, "bench-router"))
        if "iosize" in all_rows:
            plot_iosize(all_rows["iosize"], os.path.join(docdir, "bench-iosize"))
        write_doc(mach, args, all_rows, args.doc)
        log(f"bench: wrote {args.doc}")


if __name__ == "__main__":
    main()
