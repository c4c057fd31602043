#!/bin/sh
# usage: fuzz.sh BIN_DIR ITERATIONS [RUN_DIR...]: writes the seed runs of unit_fuzz_analyze
# (a five-rank run of every call kind with steps, clock offsets and drift, from the benchmark's
# generator; a GPU run; a run of overlapping slices), adds the run directories given, and runs
# test_fuzz on them all.
set -eu
bin=$1
n=$2
shift 2
dir=$(mktemp -d "${TMPDIR:-/tmp}/cs_fuzz_seeds.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$bin/cs_bench_analyzer" -r 5 -e 1200 -n 1 -d "$dir/calls" -k >/dev/null
"$bin/gpu_run" "$dir/gpu" >/dev/null
"$bin/overlap_run" "$dir/overlap" >/dev/null
"$bin/test_fuzz" -n "$n" "$dir/calls" "$dir/gpu" "$dir/overlap" "$@"
