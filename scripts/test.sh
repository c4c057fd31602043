#!/usr/bin/env bash
# The tests: install missing packages, configure with warnings as errors, build, run ctest.
# The ctest log is kept in build/ctest.log; the exit status is ctest's.
#
# usage: scripts/test.sh [ctest options, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/common.sh
build=${CS_BUILD_DIR:-build}   # another build directory, e.g. to keep one per configuration

cs_install_packages
cs_mpi_env
rm -f "$build/ctest.log"
cs_build "$build" -DCS_WERROR=ON

cd "$build"
set +e
ctest --output-on-failure "$@" 2>&1 | tee ctest.log
status=${PIPESTATUS[0]}
set -e
exit "$status"
