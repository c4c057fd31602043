#!/usr/bin/env bash
# Do two builds write the same reports?  The check of a behaviour-neutral change (a move, a
# restructure): every report of every run in RUNS_DIR (text, JSON, HTML, Perfetto, events CSV;
# Kineto imports too) analysed by both builds, and `commscope compare` over all the runs, compared
# byte for byte.
#
# usage: bench/reports_identical.sh BUILD_A BUILD_B RUNS_DIR
#        bench/reports_identical.sh --record BUILD RUNS_DIR    (record the reference runs)
#
# --record runs real jobs with BUILD's collector (Open MPI; the CPU NCCL test double for a GPU
# run) and writes synthetic ones with its benchmark, one run directory each under RUNS_DIR; the
# Kineto traces of ../shared/data are imported where present.  Exit status 0 when every report is
# identical, 1 when one differs (each difference named), 2 on a usage error.
set -euo pipefail

if [ "${1:-}" = --record ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --record BUILD RUNS_DIR" >&2; exit 2; }
    b=$(cd "$2" && pwd)
    mkdir -p "$3"
    runs=$(cd "$3" && pwd)
    if [ "$(id -u)" = 0 ]; then
        export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    fi
    mpi=(mpirun --oversubscribe --mca btl_vader_single_copy_mechanism none)
    rec() { # NAME ARGV...
        local name=$1
        shift
        rm -rf "$runs/$name"
        "$b/bin/commscope" run -o "$runs/$name" --quiet --no-analyze -- "$@" >/dev/null 2>&1 || true
    }
    rec train "${mpi[@]}" -np 4 "$b/bin/cs_train" --steps 8 --steps-marker --slow-rank 2 --slow-factor 2
    rec overlap "${mpi[@]}" -np 4 "$b/bin/cs_train" --steps 8 --overlap
    rec pattern "${mpi[@]}" -np 3 "$b/bin/cs_train" --steps 20
    rec train2d "${mpi[@]}" -np 4 "$b/bin/cs_train2d" --steps 6 --steps-marker
    rec halo "${mpi[@]}" -np 4 "$b/bin/cs_test_halo" --steps 6
    rec pipeline "${mpi[@]}" -np 4 "$b/bin/cs_test_pipeline" --pp 2 --steps 8
    rec moe "${mpi[@]}" -np 4 "$b/bin/cs_test_moe" --ep 2 --steps 6
    rec allops "${mpi[@]}" -np 3 "$b/bin/cs_test_allops" "$runs/allops-expect"
    rec crash "${mpi[@]}" -np 3 "$b/bin/cs_test_crash" 200 1
    rm -rf "$runs/synthetic"
    "$b/bin/cs_bench_analyzer" -r 16 -e 20000 -n 1 -d "$runs/synthetic" -k >/dev/null
    for s in gpu_run overlap_run; do
        rm -rf "$runs/$s"
        mkdir -p "$runs/$s"
        "$b/bin/$s" "$runs/$s" >/dev/null 2>&1 || true
    done
    ls "$runs"
    exit 0
fi

[ $# -eq 3 ] || { echo "usage: $0 BUILD_A BUILD_B RUNS_DIR" >&2; exit 2; }
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
runs=$(cd "$3" && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shared="$(dirname "$0")/../../shared/data/kineto"

# analyse BUILD SIDE NAME ARGS...: every report of one input into $out/SIDE/NAME.*
analyse() {
    local build=$1 side=$2 name=$3
    shift 3
    local o="$out/$side/$name"
    mkdir -p "$out/$side"
    "$build/bin/commscope" analyze "$@" --json "$o.json" --html "$o.html" --events "$o.csv" \
        --perfetto "$o.perfetto.json" >"$o.txt" 2>"$o.err" || echo "exit $?" >>"$o.err"
}

inputs=()
for d in "$runs"/*/; do
    d=${d%/}
    ls "$d"/rank-*.cst >/dev/null 2>&1 && inputs+=("$(basename "$d")")
done
for side in a b; do
    build=$a
    [ $side = b ] && build=$b
    for name in "${inputs[@]}"; do
        analyse "$build" "$side" "$name" "$runs/$name"
    done
    if [ -d "$shared" ]; then
        analyse "$build" "$side" kineto-dlrm --from kineto "$shared/dlrm_8ranks"
        analyse "$build" "$side" kineto-hta --from kineto "$shared/hta/trace_filter_2of128"
    fi
    # commscope compare over every run (text and JSON)
    dirs=()
    for name in "${inputs[@]}"; do dirs+=("$runs/$name"); done
    "$build/bin/commscope" compare "${dirs[@]}" --json "$out/$side/compare.json" \
        >"$out/$side/compare.txt" 2>"$out/$side/compare.err" || echo "exit $?" >>"$out/$side/compare.err"
done
status=0
for f in "$out"/a/*; do
    g="$out/b/$(basename "$f")"
    if ! cmp -s "$f" "$g"; then
        echo "differs: $(basename "$f")"
        diff <(head -c 200000 "$f") <(head -c 200000 "$g") | head -5
        status=1
    fi
done
n=$(find "$out/a" -type f | wc -l)
[ $status = 0 ] && echo "identical: $n report files of ${#inputs[@]} runs, the Kineto imports and compare"
exit $status
