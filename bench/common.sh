# shellcheck shell=bash
# Shared by overhead.sh and job_overhead.sh (sourced): the build's benchmark and collector, the
# live-metrics variant of the collector's side, and the median of a list.

# cs_bench_setup NAME BUILD: sets bench (cs_bench_allreduce) and lib (the absolute library
# directory), or exits saying what is missing; allows Open MPI to run as root.
cs_bench_setup() {
    bench="$2/bin/cs_bench_allreduce"
    lib="$2/lib"
    for f in "$bench" "$lib/libcommscope.so" "$lib/libcommscope_mpi.so"; do
        if [ ! -e "$f" ]; then
            echo "$1: $f not found; build first (cmake --build $2)" >&2
            exit 1
        fi
    done
    lib=$(cd "$lib" && pwd)
    cs=$(cd "$2/bin" && pwd)/commscope
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }

# CS_BENCH_METRICS=1: the collector's side runs under `commscope run --metrics` (progress reports
# every second, the live metrics judged by the root service), so its cost is measured with them.
# cs_bench_metrics RUN_DIR COMMAND...: runs COMMAND so, prints its output, and fails when the
# metrics file did not show the ranks' calls.
cs_bench_metrics() {
    local dir=$1 out
    shift
    out=$("$cs" run -o "$dir" --quiet --no-analyze --metrics "$dir.prom" -- "$@")
    if ! grep -q '^commscope_calls_total{rank="0"' "$dir.prom" 2>/dev/null; then
        echo "bench: the metrics file $dir.prom shows no calls: are the reports running?" >&2
        exit 1
    fi
    rm -f "$dir.prom"
    printf '%s\n' "$out"
}
