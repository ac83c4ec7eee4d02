#!/usr/bin/python3
"""What bounds a row: where the binding CPU's time goes, and how fast the
row could be if vecgate's own code cost nothing.

    bench/bound.py BEFORE_BINARY [AFTER_BINARY] [--only gre,esp-gcm128]
                   [--streams 1] [--runs 3] [--duration 5] [--profile 8]
                   [--placement shared|per-site]

For each row (ab.py's row keys) both builds are set up side by side and run
interleaved (`--runs` × `--duration` s each, medians), then each build runs
once more under `perf record -a -e cpu-clock` (`--profile` s). The samples
are split by thread (the gateway processes' threads, read from /proc during
the run) and by what ran:

  kernel   the kernel (and BPF programs) in a gateway thread: the per-frame
           skb work of `sendmmsg`/`recvmsg`, the veth, and — in the
           transmitting CPU's softirq — the peer's receive;
  crypto   AEAD and hash code (aws-lc-rs) in a gateway thread;
  own      everything else a gateway thread ran in user space: the graph,
           GSO/GRO, checksums, the copies (libc's memmove) — the copies
           and the checksums are also shown apart;
  others   the sender, the receiver and anything else.

The *binding CPU* is the busiest one over the profiled run (/proc/stat).
If it is saturated, freeing vecgate's own share of it is the most any
change to vecgate's code can buy there, so

  ceiling = Gbit/s / (1 − own share of the binding CPU)

is an upper bound on that build's throughput with the same kernel, the
same I/O backend and the same crypto, and

  cycles/byte floor = gateway cycles/byte × (kernel + crypto) / (kernel +
  crypto + own), over the gateway threads on every CPU

a lower bound on its gateway cycles/byte. Both are printed next to the
issue-17 targets (2× the before build's Gbit/s, ½ its cycles/byte). A
ceiling read off a CPU that was not saturated (< 95 % busy) is marked: it
says nothing (the floor sums the gateway threads on every CPU and needs no
saturated one). A run that fails is reported and left out, as in ab.py. Needs `perf` (linux-perf, installed by
scripts/install-deps.sh). Compare nothing across runs.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402
import bench  # noqa: E402

# Symbols of the AEAD and hash code vecgate calls (aws-lc-rs): the work a
# tunnel must do whatever the rest of the code costs.
CRYPTO = re.compile(r"aes|gcm|ghash|gmult|aead|CRYPTO_|init_IV|chacha|poly1305|sha1|sha256|hmac", re.I)
# Parts of vecgate's own work shown apart: whole-packet copies (libc) and
# Internet checksums.
COPY = re.compile(r"memmove|memcpy")
CHECKSUM = re.compile(r"checksum::|csum::")
# A binding CPU less busy than this was not what bounded the run.
SATURATED = 95.0


def gateway_tids(topo):
    """Thread ids of every gateway process of `topo`."""
    tids = set()
    for pid in bench.gateway_pids_of(topo):
        try:
            tids.update(int(t) for t in os.listdir(f"/proc/{pid}/task"))
        except OSError:
            pass
    return tids


def profiled_run(topo, streams, seconds, path):
    """One `bench.perf_run` with `perf record -a` over its middle
    `seconds`; returns (result, gateway thread ids seen during it)."""
    res, err = {}, []

    def go():
        try:
            res["r"] = bench.perf_run(topo, streams, seconds + 3)
        except Exception as e:  # reported by the caller
            err.append(e)
    th = threading.Thread(target=go)
    th.start()
    time.sleep(1.5)
    tids = gateway_tids(topo)
    subprocess.run(["perf", "record", "-a", "-e", "cpu-clock", "-F", "2000", "-o", path, "sleep", str(seconds)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    th.join()
    if err:
        raise err[0]
    return res["r"], tids


def classify(path, tids):
    """{cpu: {category: samples}} of a perf.data file."""
    out = subprocess.run(["perf", "report", "-i", path, "--no-children", "-q", "-t", "\t",
                          "--sort", "cpu,pid,dso,sym", "-F", "sample,cpu,pid,dso,sym"],
                         capture_output=True, text=True, check=True).stdout
    cpus = {}
    for line in out.splitlines():
        f = [x.strip() for x in line.split("\t")]
        if len(f) < 5 or not f[0].isdigit():
            continue
        n, cpu, pid, dso, sym = int(f[0]), int(f[1]), f[2], f[3], f[4]
        try:
            tid = int(pid.split(":", 1)[0])
        except ValueError:
            tid = -1
        if tid not in tids:
            cat = "others"
        elif dso.startswith("[kernel") or dso.startswith("bpf_prog"):
            cat = "kernel"
        elif CRYPTO.search(sym):
            cat = "crypto"
        else:
            cat = "own"
        c = cpus.setdefault(cpu, {"kernel": 0, "crypto": 0, "own": 0, "others": 0, "copy": 0, "checksum": 0})
        c[cat] += n
        if cat == "own" and COPY.search(sym):
            c["copy"] += n
        elif cat == "own" and CHECKSUM.search(sym):
            c["checksum"] += n
    return cpus


def bounds(res, cpus):
    """The binding CPU, its busy %, each category's % of its time, and the
    part of the gateway threads' samples (every CPU) that is kernel or
    crypto work: what stays of the gateway cycles/byte if vecgate's own
    code cost nothing."""
    busy = res.get("cpu_busy") or []
    if not busy:
        return None
    bind = max(range(len(busy)), key=lambda c: busy[c])
    c = cpus.get(bind) or {}
    total = sum(c[k] for k in ("kernel", "crypto", "own", "others"))
    if not total:
        return None
    share = {k: busy[bind] * v / total for k, v in c.items()}  # % of the CPU's time
    gw = {k: sum(cc[k] for cc in cpus.values()) for k in ("kernel", "crypto", "own")}
    gw_total = sum(gw.values())
    keep = (gw["kernel"] + gw["crypto"]) / gw_total if gw_total else None
    return {"cpu": bind, "busy": busy[bind], "share": share, "keep": keep}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ab.add_build_args(ap, streams=[1], only="gre,esp-gcm128")
    ap.add_argument("--profile", type=float, default=8, help="seconds of each profiled run")
    args = ap.parse_args()
    rows = [r for r in ab.topologies() if r[0] in args.only.split(",")]
    if not rows:
        sys.exit(f"bound: no row among {args.only!r}; rows: {', '.join(k for k, _ in ab.topologies())}")
    if not shutil.which("perf"):
        sys.exit("bound: needs perf (linux-perf, scripts/install-deps.sh)")
    builds = ab.builds_of(args, "bound")
    topos, runs, prof = {}, {}, {}
    try:
        ab.set_up(rows, builds, topos, "bound")
        for streams in args.streams:
            for key, _ in rows:
                for i in range(args.runs):
                    for build in builds:
                        bench.log(f"[bound] {key} {build} {streams} stream(s) run {i + 1}/{args.runs}")
                        try:
                            r = bench.perf_run(topos[(key, build)], streams, args.duration)
                        except Exception as e:  # reported, never silently dropped
                            bench.log(f"           failed: {e}")
                            continue
                        runs.setdefault((key, build, streams), []).append(r)
                        bench.log(f"           {r['gbps']:.2f} Gbit/s")
                for build in builds:
                    bench.log(f"[bound] {key} {build} {streams} stream(s) profiled ({args.profile:g} s)")
                    path = os.path.join(bench.OUT, f"bound-{key}-{build}-{streams}.data")
                    try:
                        r, tids = profiled_run(topos[(key, build)], streams, args.profile, path)
                        prof[(key, build, streams)] = (r, bounds(r, classify(path, tids)))
                    except Exception as e:  # reported; the row prints without bounds
                        bench.log(f"           profiled run failed: {e}")
    finally:
        for t in topos.values():
            t.close()

    def med(key, build, streams, field):
        return ab.median_of(runs, key, build, streams, field)

    print("| row | streams | build | Gbit/s (median) | gw cycles/byte | profiled run Gbit/s | binding CPU (busy %) "
          "| kernel in gateways % | crypto % | vecgate's own code % (copies / checksums) | others % "
          "| ceiling if own code were free, Gbit/s | ceiling / before | gw cycles/byte floor | floor / before |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for streams in args.streams:
        for key, _ in rows:
            gb, cb = med(key, "before", streams, "gbps"), med(key, "before", streams, "gw_cpb")
            for build in builds:
                g, c = med(key, build, streams, "gbps"), med(key, build, streams, "gw_cpb")
                r, b = prof.get((key, build, streams), (None, None))
                if not b:
                    print(f"| {key} | {streams} | {build} | {bench.fmt(g)} | {bench.fmt(c)} | – | – | – | – | – | – "
                          f"| – | – | – | – |")
                    continue
                s = b["share"]
                mark = "" if b["busy"] >= SATURATED else " (not saturated: no bound)"
                # The ceiling scales this build's median by the profiled
                # run's own share (the profiled run itself is perturbed).
                ceil = g / max(1.0 - s["own"] / 100.0, 1e-6) if g else None
                floor = c * b["keep"] if c and b["keep"] is not None else None
                print(f"| {key} | {streams} | {build} | {bench.fmt(g)} | {bench.fmt(c)} | {bench.fmt(r['gbps'])} "
                      f"| {b['cpu']} ({b['busy']:.0f}) | {s['kernel']:.1f} | {s['crypto']:.1f} "
                      f"| {s['own']:.1f} ({s['copy']:.1f} / {s['checksum']:.1f}) "
                      f"| {s['others']:.1f} | {bench.fmt(ceil)}{mark} "
                      f"| {bench.fmt(ceil / gb) if ceil and gb else '–'} "
                      f"| {bench.fmt(floor)} | {bench.fmt(floor / cb) if floor and cb else '–'} |")
    print()
    print("\n".join(bench.placement_lines()))
    print()
    print("Issue 17's targets: ≥ 2× the before build's Gbit/s (GRE and plain ESP over a 1500-byte underlay) and "
          "≤ 0.5× its gateway cycles/byte (every tunnel kind). A ceiling / before under 2 (or a floor / before over "
          "0.5) says no change to vecgate's code alone can meet the target on this kernel and I/O backend.")


if __name__ == "__main__":
    main()
