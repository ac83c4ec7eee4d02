#!/usr/bin/env bash
# Builds and runs the cargo-fuzz targets of fuzz/ (the wire parsers, the
# IKE state machines driven through whole exchanges: ike_exchanges, and the
# REST API's JSON bodies through its handlers: api_bodies).
#
#   scripts/fuzz.sh build            build every target (nightly, ASan)
#   scripts/fuzz.sh run SECONDS [T]  run each target (or only T...) for
#                                    SECONDS, one after the other, then
#                                    print executions per target
#   scripts/fuzz.sh seed             write the tshark test's frames and
#                                    their layers into fuzz/corpus/<target>/
#   scripts/fuzz.sh list             list the targets
#
# Targets run sequentially on purpose: the machine has two cores shared
# with everything else. A crash stops that target, is reported in the
# summary and makes the script exit 1; its input is in
# fuzz/artifacts/<target>/.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
self="$root/scripts/fuzz.sh"
cd "$root/fuzz"

targets() { cargo +nightly fuzz list; }

case "${1:-}" in
build)
    cargo +nightly fuzz build -O
    ;;
list)
    targets
    ;;
seed)
    WIRE_FUZZ_SEEDS="$root/fuzz/corpus" cargo test --manifest-path "$root/Cargo.toml" \
        -p wire --test tshark tshark_dissects_every_builder
    ;;
run)
    secs="${2:?usage: scripts/fuzz.sh run SECONDS [TARGET...]}"
    shift 2
    if [ "$#" -gt 0 ]; then list=("$@"); else mapfile -t list < <(targets); fi
    cargo +nightly fuzz build -O
    "$self" seed >/dev/null 2>&1 || echo "seeding failed (tshark missing?); fuzzing unseeded" >&2
    mkdir -p "$root/fuzz/logs"
    summary="$root/fuzz/logs/summary.txt"
    : >"$summary"
    failed=0
    for t in "${list[@]}"; do
        log="$root/fuzz/logs/$t.log"
        mkdir -p "corpus/$t"
        status=ok
        if ! cargo +nightly fuzz run -O "$t" "corpus/$t" -- \
            -max_total_time="$secs" -rss_limit_mb=2048 -print_final_stats=1 \
            >"$log" 2>&1; then
            status=CRASH
            failed=1
        fi
        # libFuzzer ends with "Done N runs in S second(s)" and, with
        # -print_final_stats, "stat::number_of_executed_units: N".
        runs="$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' | tail -1 || true)"
        [ -n "$runs" ] || runs="$(grep -oE '^Done [0-9]+ runs' "$log" | grep -oE '[0-9]+' | tail -1 || true)"
        [ -n "$runs" ] || runs="$(grep -oE '^#[0-9]+' "$log" | tr -d '#' | tail -1 || true)"
        cov="$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+' || true)"
        printf '%-10s %-6s runs=%-12s cov=%-6s %ss\n' "$t" "$status" "${runs:-?}" "${cov:-?}" "$secs" | tee -a "$summary"
    done
    echo "summary: $summary"
    exit "$failed"
    ;;
*)
    sed -n '2,16p' "$self" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
