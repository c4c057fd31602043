#!/usr/bin/env bash
# Deterministic counterpart of overhead.sh, for machines whose timings are noisy (shared VMs) and
# whose perf has no hardware counters: per 8-byte MPI_Allreduce on 1 rank, with and without the
# collector, (1) instructions executed inside MPI_Allreduce (wrapper + PMPI + collector), counted
# by valgrind's callgrind, and (2) page faults the program took (perf stat, or getrusage via
# /usr/bin/time when perf is missing), per call.
#
# usage: bench/counts.sh [BUILD_DIR [CALLS]]   (defaults: build, 20000; needs valgrind)
set -euo pipefail

build=${1:-build}
calls=${2:-20000}
bench="$build/bin/cs_bench_allreduce"
lib=$(cd "$build/lib" && pwd)
command -v valgrind >/dev/null || { echo "counts.sh: valgrind not found (apt-get install valgrind)" >&2; exit 1; }
if [ "$(id -u)" = 0 ]; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pre="$lib/libcommscope_mpi.so:$lib/libcommscope.so"
# The benchmark makes calls/10+1 warm-up calls and then REPEATS x calls; one repeat here.
total=$((calls / 10 + 1 + calls))

instr() { # $1: with|without -> instructions per MPI_Allreduce
    local env=()
    [ "$1" = with ] && env=(LD_PRELOAD="$pre" COMMSCOPE_DIR="$tmp/run")
    # Collect from the outermost entry: the wrapper (with) or Open MPI's own entry point, which
    # callgrind names PMPI_Allreduce (without; MPI_Allreduce is its alias).
    local fn=PMPI_Allreduce
    [ "$1" = with ] && fn=MPI_Allreduce
    env "${env[@]}" valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.$1" \
        --toggle-collect=$fn "$bench" "$calls" 1 \
        >/dev/null 2>"$tmp/vg.$1"
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$tmp/vg.$1" | awk -v n="$total" '{printf "%.1f", $1 / n}'
}
faults() { # $1: with|without $2: calls -> page faults of the whole run
    local env=()
    [ "$1" = with ] && env=(LD_PRELOAD="$pre" COMMSCOPE_DIR="$tmp/run")
    env "${env[@]}" perf stat -x, -e page-faults "$bench" "$2" 2>&1 >/dev/null | sed -n 's/^\([0-9]*\),.*page-faults.*/\1/p'
}
iw=$(instr with); io=$(instr without)
echo "instructions per call: without $io  with $iw  added $(awk -v a="$iw" -v b="$io" 'BEGIN {printf "%.1f", a - b}')"
if command -v perf >/dev/null; then
    # Page faults per call: the difference between a run of 10x calls and one of calls (each
    # 5.1 x calls in all), so the start-up's faults cancel.
    for side in without with; do
        f1=$(faults $side "$calls"); f2=$(faults $side $((calls * 10)))
        awk -v a="$f1" -v b="$f2" -v n="$calls" -v s="$side" \
            'BEGIN {printf "page faults per call (%s): %.4f\n", s, (b - a) / (9 * 5.1 * n)}'
    done
fi
