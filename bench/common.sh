# shellcheck shell=bash
# Shared by overhead.sh and job_overhead.sh (sourced): the build's benchmark and collector, and
# the median of a list.

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
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
}

median() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
