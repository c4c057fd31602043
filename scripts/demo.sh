#!/usr/bin/env bash
# The demo: install missing packages, build, and trace a 4-rank data-parallel training job in
# which rank 2 computes twice as long as the others; prints the program's output and the analysis.
#
# usage: scripts/demo.sh [extra cs_train options, e.g. --overlap]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
build=${CS_BUILD_DIR:-build}   # another build directory, e.g. to keep one per configuration

cs_install_packages
cs_mpi_env
cs_build "$build"

run=$build/demo-run
rm -rf "$run"
echo
echo "+ $build/bin/commscope run -o $run -- mpirun --oversubscribe -np 4 $build/bin/cs_train --steps-marker --slow-rank 2 --slow-factor 2 $*"
exec "$build/bin/commscope" run -o "$run" -- \
    mpirun --oversubscribe -np 4 "$build/bin/cs_train" --steps-marker --slow-rank 2 --slow-factor 2 "$@"
