#!/usr/bin/python3
"""Before/after: two builds of the gateway side by side in one run.

    bench/ab.py BEFORE_BINARY [AFTER_BINARY] [--runs N] [--duration S]

Every topology is set up twice, once per build, and the runs interleave
(before, after, before, after, ...) so that drift on a shared machine hits
both builds alike; the traffic tool (`vecgate perf`) is the same for both:
target/release/vecgate, or $VECGATE. Rows: one-hop routing and the GRE,
VXLAN and ESP (AES-GCM-128, plain and NAT-T) tunnels over a 1500-byte
underlay, GRE and ESP over a 64K-MTU underlay and over a 1500-byte AF_XDP
underlay, ESP AES-CBC-128 + HMAC-SHA1 over both underlays, 1 and 8 TCP
streams (--only picks rows). Prints medians of each build and after/before
ratios measured in this run; compare nothing across runs. A build older than
state_dir needs VECGATE_NO_STATE_DIR=1 (see vecgate_topo.py).

--placement per-site runs each site of a two-site topology on its own CPU
(site A's gateway with the sender, site B's with the receiver, gwB's
underlay receive steered there by RPS), as if the sites were two machines;
the default, shared, puts every gateway on the gateway CPUs (bench.PLACEMENT).
Each run also records how busy every CPU was (/proc/stat), printed per row.

--references also sets up what each row is read against in issue 17's
table (kernel forwarding, the no-tunnel ceiling, kernel VXLAN, strongSwan,
the I/O floors of `make floor`) and measures each in the same interleaved
loop, so the second table's before/reference and after/reference ratios
come from one run; ESP in UDP is read against the VXLAN row of the same
build.

With two workers (routing) one TCP stream lands on either by the kernel's
flow hash, sharing its CPU with the sender or with the receiver by chance
(bench.carrier_cpu): each run is tagged with the CPU that carried it
(`3.21@0`) when a row's runs differ, and a third table gives the medians
within each placement.
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
        ("esp-sha1", lambda: vt.VecgateTunnel("esp", algorithm="aes128-sha1")),
        ("esp-sha1-64k", lambda: vt.VecgateTunnel("esp", algorithm="aes128-sha1", underlay_mtu=65535)),
        ("gre-xdp", lambda: vt.VecgateTunnel("gre", underlay_driver="af_xdp")),
        ("esp-gcm128-xdp", lambda: vt.VecgateTunnel("esp", algorithm="aes128gcm16", underlay_driver="af_xdp")),
    ]


# Row key -> the reference keys it is read against (issue 17's targets).
ROW_REFS = {
    "routing": ["kernel-fwd", "floor"],
    "gre": ["floor-gre"],
    "vxlan": ["kernel-vxlan"],
    "esp-gcm128": ["floor-gre"],
    "gre-64k": ["kernel-plain", "floor-gre-64k"],
    "esp-gcm128-64k": ["kernel-plain", "strongswan"],
    "esp-sha1": ["floor-gre"],
    "esp-sha1-64k": ["floor-gre-64k"],
    "gre-xdp": ["floor-gre-xdp"],
    "esp-gcm128-xdp": ["floor-gre-xdp"],
}


def references():
    """(key, label, constructor) of every reference contender; the I/O
    floors only when `make floor` built them."""
    import floor_topo
    import peers
    r = [("kernel-fwd", "Linux kernel forwarding", lambda: bench.Router("kernel")),
         ("kernel-plain", "Linux kernel forwarding, no tunnel (ceiling)", lambda: peers.KernelPlain()),
         ("kernel-vxlan", "Linux kernel VXLAN", lambda: peers.KernelVxlan()),
         ("strongswan", "strongSwan kernel-libipsec aes128gcm16", lambda: peers.StrongswanEsp())]
    if bench.floor_built():
        r += [("floor", "I/O floor (AF_PACKET)", lambda: bench.Router("floor", workers=2)),
              ("floor-gre", "I/O floor GRE twin, per-packet, 1500 underlay", lambda: floor_topo.FloorTunnel(True)),
              ("floor-gre-64k", "I/O floor GRE twin, 64K-MTU underlay", lambda: floor_topo.FloorTunnel(False)),
              ("floor-gre-xdp", "I/O floor GRE twin, per-packet, 1500 AF_XDP underlay",
               lambda: floor_topo.FloorTunnel(True, driver="af_xdp"))]
    return r


def add_build_args(ap, streams, only):
    """The arguments ab.py and bound.py share: the two builds, runs,
    duration, streams, rows and placement."""
    ap.add_argument("before")
    ap.add_argument("after", nargs="?", default=bench.VECGATE)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--streams", type=lambda v: [int(x) for x in v.split(",")], default=streams)
    ap.add_argument("--only", default=only, help="comma-separated row keys")
    bench.add_placement_arg(ap)


def builds_of(args, tool):
    """{"before": path, "after": path} of parsed `add_build_args`, with the
    placement set; exits unless root and both builds exist."""
    bench.set_placement(args.placement)
    if os.geteuid() != 0:
        sys.exit(f"{tool}: needs root (network namespaces)")
    builds = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for b in builds.values():
        if not os.path.exists(b):
            sys.exit(f"{tool}: {b} missing")
    os.makedirs(bench.OUT, exist_ok=True)
    return builds


def set_up(rows, builds, topos, tool):
    """Every row's topology once per build, into `topos[(key, build)]`
    (the caller closes them)."""
    for key, make in rows:
        for build, path in builds.items():
            bench.log(f"[{tool}] setting up {key} ({build})")
            bench.GATEWAY = path
            topos[(key, build)] = make()


def median_of(results, key, build, streams, field):
    """Median of `field` over the runs in `results[(key, build, streams)]`
    that have it (None when none has)."""
    vals = [r[field] for r in results.get((key, build, streams), []) if r.get(field) is not None]
    return statistics.median(vals) if vals else None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_build_args(ap, streams=[1, 8], only="")
    ap.add_argument("--references", action="store_true",
                    help="also measure each row's reference contenders in the same loop")
    args = ap.parse_args()
    builds = builds_of(args, "ab")
    rows = [r for r in topologies() if not args.only or r[0] in args.only.split(",")]
    wanted = {k for key, _ in rows for k in ROW_REFS.get(key, [])} if args.references else set()
    refs = [r for r in references() if r[0] in wanted] if wanted else []
    ref_labels = {k: label for k, label, _ in refs}
    topos, results = {}, {}
    try:
        set_up(rows, builds, topos, "ab")
        bench.GATEWAY = builds["after"]
        for key, label, make in refs:
            bench.log(f"[ab] setting up reference {label}")
            try:
                topos[(key, "ref")] = make()
            except Exception as e:  # reported, never silently dropped
                bench.log(f"[ab] SKIPPED reference {label}: {e}")
        # One pass: every row's builds, then the references, interleaved
        # run by run so that drift hits them all alike.
        order = [(key, build) for key, _ in rows for build in builds] + \
                [(key, "ref") for key, _, _ in refs if (key, "ref") in topos]
        for streams in args.streams:
            for i in range(args.runs):
                for key, build in order:
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
        return median_of(results, key, build, streams, field)

    def ratio(a, b):
        return f"{a / b:.2f}" if a is not None and b else "–"

    def cpus(key, streams):
        """Carrier CPUs of a row's runs, every build and reference."""
        return {r.get("carrier_cpu") for (k, _, st), rs in results.items() if k == key and st == streams
                for r in rs if r.get("carrier_cpu") is not None}

    def placements(key, streams):
        """Carrier CPUs of a row's runs and of its references' runs."""
        return cpus(key, streams) | {c for r in ROW_REFS.get(key, []) for c in cpus(r, streams)}

    def tagged(runs, key, streams):
        """Gbit/s of each run, with the CPU that carried it when a row's
        runs (or its references') were carried on more than one (see
        bench.carrier_cpu)."""
        return bench.runs_with_cpu(runs, mixed=len(placements(key, streams)) > 1, sep=" ")

    def med_on(key, build, streams, cpu):
        """(median Gbit/s, runs) of the runs carried on `cpu`."""
        g, _, n = bench.by_carrier(results.get((key, build, streams), [])).get(cpu, (None, None, 0))
        return g, n

    print("| row | streams | before Gbit/s | after Gbit/s | after/before Gbit/s "
          "| before gw cycles/byte | after gw cycles/byte | after/before cycles/byte | runs (before; after) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for streams in args.streams:
        for key, _ in rows:
            gb, ga = med(key, "before", streams, "gbps"), med(key, "after", streams, "gbps")
            cb, ca = med(key, "before", streams, "gw_cpb"), med(key, "after", streams, "gw_cpb")
            runs = "; ".join(tagged(results.get((key, b, streams), []), key, streams) for b in builds)
            print(f"| {key} | {streams} | {bench.fmt(gb)} | {bench.fmt(ga)} | {ratio(ga, gb)} "
                  f"| {bench.fmt(cb)} | {bench.fmt(ca)} | {ratio(ca, cb)} | {runs} |")
    # Rows whose flow landed on different CPUs from run to run: medians
    # within one placement, so that no ratio compares two placements.
    split = [(key, st) for st in args.streams for key, _ in rows if len(placements(key, st)) > 1]
    if split:
        print()
        print("| row | streams | carried on CPU | before Gbit/s (runs) | after Gbit/s (runs) | after/before "
              "| references Gbit/s (runs) | after/reference |")
        print("|---|---|---|---|---|---|---|---|")
        for key, st in split:
            for cpu in sorted(placements(key, st)):
                (gb, nb), (ga, na) = med_on(key, "before", st, cpu), med_on(key, "after", st, cpu)
                # References with a process of their own (the floors); a
                # kernel datapath has no carrier CPU to compare.
                refs_here = [(r, *med_on(r, "ref", st, cpu)) for r in ROW_REFS.get(key, [])
                             if r in ref_labels and cpus(r, st)]
                print(f"| {key} | {st} | {cpu} | {bench.fmt(gb)} ({nb}) | {bench.fmt(ga)} ({na}) | {ratio(ga, gb)} "
                      f"| {', '.join(f'{r} {bench.fmt(g)} ({n})' for r, g, n in refs_here) or '–'} "
                      f"| {', '.join(ratio(ga, g) for _, g, _ in refs_here) or '–'} |")
    # How busy each CPU was (/proc/stat over each run, medians): which one
    # bound the row.
    print()
    print("| row | streams | build | busy % per CPU (median of runs) |")
    print("|---|---|---|---|")
    for streams in args.streams:
        for key, build in order:
            runs = [r["cpu_busy"] for r in results.get((key, build, streams), []) if r.get("cpu_busy")]
            if runs:
                cols = [statistics.median(r[c] for r in runs if c < len(r)) for c in range(len(runs[0]))]
                print(f"| {key} | {streams} | {build} | {' / '.join(f'{v:.0f}' for v in cols)} |")
    print()
    print("\n".join(bench.placement_lines()))
    if not args.references:
        return
    # Each row against its references, all measured in the loop above; ESP
    # in UDP against the VXLAN row of the same build.
    print()
    print("| row | streams | reference | reference Gbit/s | before/reference | after/reference "
          "| reference gw cycles/byte | after/reference cycles/byte |")
    print("|---|---|---|---|---|---|---|---|")
    keys = [key for key, _ in rows]
    for streams in args.streams:
        for key in keys:
            pairs = [(ref_labels[r], r, "ref") for r in ROW_REFS.get(key, []) if r in ref_labels]
            if key == "esp-gcm128-natt" and "vxlan" in keys:
                pairs.append(("vecgate VXLAN (same build)", "vxlan", None))
            for label, rkey, rbuild in pairs:
                gb, ga = med(key, "before", streams, "gbps"), med(key, "after", streams, "gbps")
                if rbuild is None:  # the same build's row
                    rb, ra = med(rkey, "before", streams, "gbps"), med(rkey, "after", streams, "gbps")
                    print(f"| {key} | {streams} | {label} | {bench.fmt(rb)} / {bench.fmt(ra)} | {ratio(gb, rb)} "
                          f"| {ratio(ga, ra)} | – | – |")
                    continue
                rg, rc = med(rkey, rbuild, streams, "gbps"), med(rkey, rbuild, streams, "gw_cpb")
                ca = med(key, "after", streams, "gw_cpb")
                print(f"| {key} | {streams} | {label} | {bench.fmt(rg)} | {ratio(gb, rg)} | {ratio(ga, rg)} "
                      f"| {bench.fmt(rc)} | {ratio(ca, rc)} |")


if __name__ == "__main__":
    main()
