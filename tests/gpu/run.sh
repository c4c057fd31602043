#!/bin/sh
# GPU check for the lent H200 machine (never needed by CI): build commscope (no MPI needed), build
# overlap.cu with nvcc against /usr/local/cuda's NCCL, run it under libcommscope.so, and print
# PASS/FAIL lines for: kernels captured, NCCL kernels mapped to calls, overlap > 0 and
# consistent with the program's own CUDA-event timings.  Everything useful goes to stdout.
# Exit 0 all pass, 1 a check failed, 77 no GPU / no CUDA here (skip).
#
# The lent H200 image has CUDA, NCCL (a system package) and CMake but not the -dev packages of
# hwloc, libpcap and yajl.  What worked (2026-11-29): `apt-get download libhwloc-dev libhwloc15
# libpcap-dev libpcap0.8-dev libpcap0.8 libyajl-dev libyajl2 libdbus-1-3` here into a folder
# excluded in .git/info/exclude and carried, then on the device: `dpkg -x` each into /tmp/hw,
# LD_LIBRARY_PATH=/tmp/hw/usr/lib/x86_64-linux-gnu:/tmp/hw/lib/x86_64-linux-gnu and
# CS_CMAKE_ARGS=-DCMAKE_PREFIX_PATH=/tmp/hw/usr sh tests/gpu/run.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
WORK=/tmp/cs-gpu-check
BUILD=$WORK/build
mkdir -p "$WORK"
exec 2>&1
echo "== GPU check $(date -u +%FT%TZ) in $ROOT"
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "SKIP: no GPU (nvidia-smi -L failed)"; exit 77
fi
if [ ! -x "$CUDA/bin/nvcc" ]; then echo "SKIP: no $CUDA/bin/nvcc"; exit 77; fi
nvidia-smi -L
"$CUDA/bin/nvcc" --version | tail -2
NCCL_INC=$CUDA/include; NCCL_LIB=""
for d in "$CUDA/lib" "$CUDA/lib64" "$CUDA/targets/x86_64-linux/lib"; do
    [ -e "$d/libnccl.so.2" ] && NCCL_LIB=$d && break
done
# Elsewhere (a system package, or the nvidia-nccl wheel next to PyTorch): NCCL_LIB, or the first
# libnccl.so.2 found; its header from $CUDA/include, /usr/include or beside the library.
if [ -z "$NCCL_LIB" ]; then
    found=${NCCL_LIB_DIR:-$(dirname "$(find / -name libnccl.so.2 -not -path "/proc/*" 2>/dev/null |
                                        head -1)")}
    [ -e "$found/libnccl.so.2" ] && NCCL_LIB=$found
    for inc in "$CUDA/include" /usr/include "$(dirname "$found")/include"; do
        [ -e "$inc/nccl.h" ] && NCCL_INC=$inc && break
    done
    [ -n "$NCCL_LIB" ] && ln -sf "$NCCL_LIB/libnccl.so.2" "$WORK/libnccl.so"
fi
if [ -z "$NCCL_LIB" ]; then echo "FAIL: no libnccl.so.2 found"; exit 1; fi
echo "NCCL: $NCCL_LIB/libnccl.so.2, header $(grep -m1 NCCL_VERSION_CODE "$NCCL_INC/nccl.h")"

echo "== build commscope"
# CS_CMAKE_ARGS: extra configure options, e.g. where hwloc is on a machine without its package.
# shellcheck disable=SC2086
if ! (cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CS_CMAKE_ARGS:-} >"$WORK/cmake.log" 2>&1 &&
      cmake --build "$BUILD" -j"$(nproc)" >"$WORK/build.log" 2>&1); then
    echo "FAIL: build"; tail -n 30 "$WORK/cmake.log" "$WORK/build.log"; exit 1
fi
grep -i "mpi" "$WORK/cmake.log" | head -2
ls "$BUILD/lib/libcommscope.so" "$BUILD/bin/commscope" || { echo "FAIL: build products"; exit 1; }

echo "== build overlap.cu"
if ! "$CUDA/bin/nvcc" -O2 -cudart shared -o "$WORK/overlap" "$ROOT/tests/gpu/overlap.cu" \
        -I"$NCCL_INC" -L"$NCCL_LIB" -L"$WORK" -lnccl -Xlinker -rpath -Xlinker "$NCCL_LIB" \
        >"$WORK/nvcc.log" 2>&1; then
    echo "FAIL: nvcc"; cat "$WORK/nvcc.log"; exit 1
fi

echo "== run without commscope (reference)"
timeout 120 "$WORK/overlap" 20 >"$WORK/plain.txt" 2>&1; echo "exit $?"; cat "$WORK/plain.txt"

echo "== run under commscope"
RUN=$WORK/run; rm -rf "$RUN"
LD_LIBRARY_PATH=$NCCL_LIB:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-} RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
    COMMSCOPE_DIR=$RUN LD_PRELOAD=$BUILD/lib/libcommscope.so \
    timeout 120 "$WORK/overlap" 20 >"$WORK/traced.txt" 2>&1
rc=$?
echo "exit $rc"; cat "$WORK/traced.txt"
[ $rc -eq 0 ] && echo "PASS: program ran unchanged under commscope" ||
    echo "FAIL: program exit status $rc under commscope"
ls -l "$RUN" 2>&1

echo "== checks"
python3 "$ROOT/tests/gpu/check.py" "$RUN" "$WORK/traced.txt"; crc=$?

echo "== commscope analyze"
timeout 60 "$BUILD/bin/commscope" analyze "$RUN" --json "$WORK/report.json" 2>&1 | head -60
[ $rc -eq 0 ] && [ $crc -eq 0 ] && { echo "GPU CHECK: PASS"; exit 0; }
echo "GPU CHECK: FAIL"; exit 1
