#!/usr/bin/env bash
# ns added per intercepted 8-byte MPI_Allreduce on 1 rank: runs bench/allreduce.c alternately
# with and without the collector preloaded (PAIRS interleaved pairs, so drift in machine load hits
# both sides alike) and reports the median of each side, their difference, and the floor it is
# budgeted against: two clock reads, measured in the same runs (DESIGN: at most the floor + 15 ns).
#
# usage: bench/overhead.sh [BUILD_DIR [PAIRS [CALLS]]]   (defaults: build, 11, 200000)
#        CS_BENCH_METRICS=1: the collector's side with live metrics (commscope run --metrics)
set -euo pipefail

build=${1:-build}
pairs=${2:-11}
calls=${3:-200000}
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
cs_bench_setup overhead.sh "$build"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run: prints ns per call.  The program is started directly (an MPI singleton), the same as
# `commscope run -- PROGRAM` does for one process.
one() {
    local out
    if [ "$1" = with ]; then
        mkdir -p "$tmp/run"
        if [ "${CS_BENCH_METRICS:-0}" = 1 ]; then
            rmdir "$tmp/run"
            out=$(cs_bench_metrics "$tmp/run" "$bench" "$calls")
        else
            out=$(LD_PRELOAD="$lib/libcommscope_mpi.so:$lib/libcommscope.so" \
                  COMMSCOPE_DIR="$tmp/run" "$bench" "$calls")
        fi
        if ! ls "$tmp/run"/rank-*.cst >/dev/null 2>&1; then
            echo "overhead.sh: the collector wrote no trace: is it really intercepting?" >&2
            exit 1
        fi
        rm -rf "$tmp/run"
    else
        out=$("$bench" "$calls")
    fi
    sed -n 's/^ns_per_call=\([0-9.]*\).*/\1/p' <<<"$out"
    sed -n 's/.*floor_ns=\([0-9.]*\).*/\1/p' <<<"$out" >>"$tmp/floor"
}

with=() without=()
for ((i = 0; i < pairs; i++)); do
    without+=("$(one without)")
    with+=("$(one with)")
    printf 'pair %2d: without %8s ns  with %8s ns\n' "$((i + 1))" "${without[-1]}" "${with[-1]}"
done

mw=$(median "${with[@]}")
mo=$(median "${without[@]}")
echo "median without: $mo ns/call"
echo "median with:    $mw ns/call"
mapfile -t floors <"$tmp/floor"
mf=$(median "${floors[@]}")
awk -v a="$mw" -v b="$mo" -v f="$mf" 'BEGIN {
    printf "added:          %.1f ns per intercepted 8-byte MPI_Allreduce\n", a - b
    printf "floor:          %.1f ns for two clock reads (budget: floor + 15 = %.1f ns)\n", f, f + 15
}'
