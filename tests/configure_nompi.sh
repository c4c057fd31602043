#!/bin/sh
# The build without MPI (a GPU machine with NCCL only; CMakeLists.txt): configure the tree with MPI
# hidden and check that it configures, says so, and has no MPI target (cs_fabric, cs_train, the
# MPI tests).  Configure only: the sources these targets leave out are the ones that include mpi.h.
# Usage: configure_nompi.sh CMAKE GENERATOR SOURCE_DIR WORK_DIR
set -u
CMAKE=$1 GEN=$2 SRC=$3 DIR=$4
rm -rf "$DIR"
if ! "$CMAKE" -G "$GEN" -S "$SRC" -B "$DIR" -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON >"$DIR.log" 2>&1; then
    cat "$DIR.log"; echo "FAIL: the tree does not configure without MPI"; exit 1
fi
grep -q "MPI not found: building without" "$DIR.log" ||
    { echo "FAIL: configure did not say it builds without MPI"; exit 1; }
targets=$("$CMAKE" --build "$DIR" --target help 2>&1)
for t in commscope commscope_cli cs_analyzer; do
    echo "$targets" | grep -qw "$t" || { echo "FAIL: target $t missing without MPI"; exit 1; }
done
for t in commscope_mpi cs_fabric cs_train cs_wire_job cs_bench_allreduce; do
    echo "$targets" | grep -qw "$t" && { echo "FAIL: MPI target $t defined without MPI"; exit 1; }
done
tests=$(cd "$DIR" && ctest -N -L mpi | grep -c "Test *#")
[ "$tests" -eq 0 ] || { echo "FAIL: $tests tests labelled mpi registered without MPI"; exit 1; }
echo "PASS: configures without MPI: no MPI targets, no mpi tests"
rm -rf "$DIR" "$DIR.log"
