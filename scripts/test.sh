#!/usr/bin/env bash
# The tests: install missing packages, configure with warnings as errors, build, run ctest.
# The ctest log is kept in build/ctest.log; the exit status is ctest's.
#
# Then the unit tests again under AddressSanitizer+UndefinedBehaviorSanitizer, and the collector's
# buffer tests under ThreadSanitizer (CS_SANITIZERS=0 skips both).
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
cd - >/dev/null

if [ "${CS_SANITIZERS:-1}" != 0 ]; then
    # Sanitized builds run the tests that need no preloading into MPI jobs.
    for san in "address;undefined:-L unit" "thread:-R ^collector_"; do
        flags=${san%%:*}
        sel=${san#*:}
        dir="$build-${flags%%;*}"
        echo "=== sanitizer build: $flags ($sel) ==="
        cs_build "$dir" -DCS_WERROR=ON -DCS_SANITIZE="$flags" >/dev/null
        set +e
        # shellcheck disable=SC2086
        (cd "$dir" && ctest --output-on-failure $sel 2>&1 | tee -a "$OLDPWD/$build/ctest.log")
        s=$?
        set -e
        [ "$s" -eq 0 ] || status=$s
    done
fi
exit "$status"
