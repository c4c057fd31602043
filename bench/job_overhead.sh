#!/usr/bin/env bash
# What the collector costs a job that moves large messages (DESIGN: < 1 % for messages of 128 KiB
# and more): an MPI job of RANKS ranks doing MPI_Allreduce of each SIZE, run alternately with and
# without the collector preloaded (PAIRS interleaved pairs, so drift in machine load hits both
# sides alike).  Per size: the best and the median time per call of each side, and their relative
# differences.  The best is the figure to read: on a shared machine the time per call can jump
# between modes (seen here: 31 and 83 us at 128 KiB, with and without the collector alike), and
# a median can then land in different modes for the two sides.
# The collector's run also has to leave one trace per rank, so a preload that did not take is
# caught rather than measured as "no overhead".
#
# usage: bench/job_overhead.sh [BUILD_DIR [PAIRS [RANKS [SIZE...]]]]
#        (defaults: build, 9, 2, 131072 1048576 16777216)
#        CS_BENCH_METRICS=1: the collector's side with live metrics (commscope run --metrics)
set -euo pipefail

build=${1:-build}
pairs=${2:-9}
ranks=${3:-2}
shift $(($# < 3 ? $# : 3))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(131072 1048576 16777216)
# shellcheck source=bench/common.sh
. "$(dirname "$0")/common.sh"
cs_bench_setup job_overhead.sh "$build"
command -v mpirun >/dev/null || { echo "job_overhead.sh: mpirun not found" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# One run of CALLS calls of SIZE bytes: prints ns per call (rank 0, best of 3 repetitions).
one() { # $1: with|without $2: size $3: calls
    local out
    if [ "$1" = with ]; then
        mkdir -p "$tmp/run"
        if [ "${CS_BENCH_METRICS:-0}" = 1 ]; then
            rmdir "$tmp/run"
            out=$(cs_bench_metrics "$tmp/run" mpirun --oversubscribe -np "$ranks" "$bench" "$3" 3 "$2")
        else
            out=$(LD_PRELOAD="$lib/libcommscope_mpi.so:$lib/libcommscope.so" \
                  COMMSCOPE_DIR="$tmp/run" mpirun --oversubscribe -np "$ranks" -x LD_PRELOAD \
                  -x COMMSCOPE_DIR "$bench" "$3" 3 "$2")
        fi
        local n
        n=$(find "$tmp/run" -name 'rank-*.cst' | wc -l)
        if [ "$n" -ne "$ranks" ]; then
            echo "job_overhead.sh: the collector wrote $n traces for $ranks ranks" >&2
            exit 1
        fi
        rm -rf "$tmp/run"
    else
        out=$(mpirun --oversubscribe -np "$ranks" "$bench" "$3" 3 "$2")
    fi
    sed -n 's/^ns_per_call=\([0-9.]*\).*/\1/p' <<<"$out"
}

echo "ranks $ranks, $pairs interleaved pairs per size, best of 3 repetitions per run"
for size in "${sizes[@]}"; do
    # About 0.3 s per repetition at a few GB/s; at least 50 calls.
    calls=$((1000000000 / (size > 1 ? size : 1)))
    [ "$calls" -ge 50 ] || calls=50
    [ "$calls" -le 200000 ] || calls=200000
    with=() without=()
    for ((i = 0; i < pairs; i++)); do
        without+=("$(one without "$size" "$calls")")
        with+=("$(one with "$size" "$calls")")
        [ -z "${CS_VERBOSE:-}" ] || echo "  pair $((i + 1)): without ${without[-1]} with ${with[-1]}"
    done
    mo=$(median "${without[@]}")
    mw=$(median "${with[@]}")
    bo=$(printf '%s\n' "${without[@]}" | sort -g | head -1)
    bw=$(printf '%s\n' "${with[@]}" | sort -g | head -1)
    awk -v s="$size" -v c="$calls" -v a="$mw" -v b="$mo" -v x="$bw" -v y="$bo" 'BEGIN {
        printf "%10d bytes, %6d calls: best without %11.1f  with %11.1f ns/call  overhead %+.2f %%\n",
               s, c, y, x, 100 * (x - y) / y
        printf "%10s %13s  median without %9.1f  with %11.1f ns/call  overhead %+.2f %%\n",
               "", "", b, a, 100 * (a - b) / b }'
done
