#!/usr/bin/python3
"""Before/after: two builds of the gateway side by side in one run.

    bench/ab.py BEFORE_BINARY [AFTER_BINARY] [--runs N] [--duration S]

Every topology is set up twice, once per build, and the runs interleave
(before, after, before, after, ...) so that drift on a shared machine hits
both builds alike; the traffic tool (`vecgate perf`) is the same for both:
target/release/vecgate, or $VECGATE. Rows: one-hop routing and the GRE,
VXLAN and ESP (AES-GCM-128, plain and NAT-T) tunnels over a 1500-byte
underlay, GRE and ESP over a 64K-MTU underlay and over a 1500-byte AF_XDP
underlay, 1 and 8 TCP streams (--only picks rows). Prints medians of each build and after/before
ratios measured in this run; compare nothing across runs. A build older than
state_dir needs VECGATE_NO_STATE_DIR=1 (see vecgate_topo.py).
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import vecgate_topo as vt  # noqa: E402


def topologies():
    """(row key, constructor) of every row; the constructor reads
    bench.GATEWAY, set to the build under test before it runs."""
    return [
        ("routing", lambda: bench.Router("vecgate", workers=2)),
        ("gre", lambda: vt.VecgateTunnel("gre")),
        ("vxlan", lambda: vt.VecgateTunnel("vxlan")),
        ("esp-gcm128", lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16")),
        ("esp-gcm128-natt", lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", nat_t=True)),
        ("gre-64k", lambda: vt.VecgateTunnel("gre", underlay_mtu=65535)),
        ("esp-gcm128-64k", lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_mtu=65535)),
        ("gre-xdp", lambda: vt.VecgateTunnel("gre", underlay_driver="af_xdp")),
        ("esp-gcm128-xdp", lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_driver="af_xdp")),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=bench.VECGATE)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--streams", type=lambda v: [int(x) for x in v.split(",")], default=[1, 8])
    ap.add_argument("--only", default="", help="comma-separated row keys")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("ab: needs root (network namespaces)")
    builds = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for b in builds.values():
        if not os.path.exists(b):
            sys.exit(f"ab: {b} missing")
    os.makedirs(bench.OUT, exist_ok=True)
    rows = [r for r in topologies() if not args.only or r[0] in args.only.split(",")]
    topos, results = {}, {}
    try:
        for key, make in rows:
            for build, path in builds.items():
                bench.log(f"[ab] setting up {key} ({build})")
                bench.GATEWAY = path
                topos[(key, build)] = make()
        for streams in args.streams:
            for i in range(args.runs):
                for key, _ in rows:
                    for build in builds:
                        bench.log(f"[ab] {key:16s} {build:6s} {streams} stream(s) run {i + 1}/{args.runs}")
                        try:
                            res = bench.perf_run(topos[(key, build)], streams, args.duration)
                        except Exception as e:  # reported, never silently dropped
                            bench.log(f"           failed: {e}")
                            continue
                        results.setdefault((key, build, streams), []).append(res)
                        bench.log(f"           {res['gbps']:.2f} Gbit/s")
    finally:
        for t in topos.values():
            t.close()

    def med(key, build, streams, field):
        vals = [r[field] for r in results.get((key, build, streams), []) if r.get(field) is not None]
        return statistics.median(vals) if vals else None

    def ratio(a, b):
        return f"{a / b:.2f}" if a is not None and b else "–"

    print("| row | streams | before Gbit/s | after Gbit/s | after/before Gbit/s "
          "| before gw cycles/byte | after gw cycles/byte | after/before cycles/byte | runs (before; after) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for streams in args.streams:
        for key, _ in rows:
            gb, ga = med(key, "before", streams, "gbps"), med(key, "after", streams, "gbps")
            cb, ca = med(key, "before", streams, "gw_cpb"), med(key, "after", streams, "gw_cpb")
            runs = "; ".join(" ".join(f"{r['gbps']:.2f}" for r in results.get((key, b, streams), []))
                             for b in builds)
            print(f"| {key} | {streams} | {bench.fmt(gb)} | {bench.fmt(ga)} | {ratio(ga, gb)} "
                  f"| {bench.fmt(cb)} | {bench.fmt(ca)} | {ratio(ca, cb)} | {runs} |")


if __name__ == "__main__":
    main()
