#!/bin/sh
# GPU check for the lent H200 machine (never needed by CI): build commscope (no MPI needed), build
# overlap.cu with nvcc against /usr/local/cuda's NCCL, run it under libcommscope.so, and print
# PASS/FAIL lines for: kernels captured, NCCL kernels mapped to calls, overlap > 0 and
# consistent with the program's own CUDA-event timings.  Then the newer real-GPU paths
# (check_steps.py): overlap.cu again with `steps` (ProfilerStep#N NVTX ranges recorded through the
# injection, an NCCL send/recv group to itself per step): steps from NVTX with the program's
# count, the per-step GPU budget summing to the step time and consistent with the program's clock
# and CUDA events, the GPU what-if replay within 5 % of the measured step, the NCCL point-to-point
# pairs matched on GPU time; and `commscope fabric --nccl auto` on one rank (NCCL collectives
# rows; skipped when cs_fabric was not built for want of MPI); and a real PyTorch DDP training loop
# on NCCL started by `commscope run -- torchrun` (torch_ddp.py, check_torch.py: result unchanged,
# NVTX steps from torch.cuda.nvtx, NCCL all-reduces, GPU budget).  Everything useful goes to stdout.
# Time: the build (a minute or two on 16 cores) dominates; the runs take seconds each (expected
# total well under 5 minutes; the per-step timeouts only stop a hang).  Elapsed seconds are
# printed after each part.
# Exit 0 all pass, 1 a check failed, 77 no GPU / no CUDA here (skip).
#
# The lent H200 image has CUDA, NCCL, PyTorch and CMake but not the -dev packages of hwloc,
# libpcap and yajl, nor Open MPI (the build then leaves MPI out: CMakeLists.txt).  Prepared
# (not yet run there: the loan was withdrawn each time): `apt-get download libhwloc-dev
# libhwloc15 libpcap-dev libpcap0.8-dev libpcap0.8 libyajl-dev libyajl2 libdbus-1-3` into
# .gpu-deps/ (excluded in .git/info/exclude, carried), zlib1g and zlib1g-dev into
# .gpu-deps/opt/; on the device `dpkg -x` each into /tmp/hw (opt/ only without
# /usr/include/zlib.h), re-point the absolute symlinks there into /tmp/hw, then
# LD_LIBRARY_PATH=/tmp/hw/usr/lib/x86_64-linux-gnu:/tmp/hw/lib/x86_64-linux-gnu
# CS_CMAKE_ARGS=-DCMAKE_PREFIX_PATH=/tmp/hw/usr sh tests/gpu/run.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
CUDA=${CUDA_HOME:-/usr/local/cuda}
WORK=/tmp/cs-gpu-check
BUILD=$WORK/build
mkdir -p "$WORK"
exec 2>&1
START=$(date +%s)
elapsed() { echo "(elapsed $(( $(date +%s) - START )) s)"; }
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
# CUPTI: where the toolkit keeps it (lib64, or extras/CUPTI/lib64); the collector finds both, and
# this says which one the checks use.
CUPTI=${COMMSCOPE_CUPTI_LIB:-}
for c in "$CUDA/lib64/libcupti.so" "$CUDA/extras/CUPTI/lib64/libcupti.so" \
         "$(find / -name 'libcupti.so*' -not -path '/proc/*' 2>/dev/null | head -1)"; do
    [ -z "$CUPTI" ] && [ -e "$c" ] && CUPTI=$c
done
echo "CUPTI: ${CUPTI:-none found}"
[ -n "$CUPTI" ] && export COMMSCOPE_CUPTI_LIB="$CUPTI"

echo "== build commscope"
# CS_CMAKE_ARGS: extra configure options, e.g. where hwloc is on a machine without its package.
# Only what the checks run (the collector, the launcher/analyzer, the fabric benchmark with MPI).
targets="commscope commscope_cli"
# shellcheck disable=SC2086
if ! (cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo ${CS_CMAKE_ARGS:-} >"$WORK/cmake.log" 2>&1 &&
      { grep -q "MPI not found" "$WORK/cmake.log" || targets="$targets cs_fabric"; } &&
      cmake --build "$BUILD" -j"$(nproc)" --target $targets >"$WORK/build.log" 2>&1); then
    echo "FAIL: build"; tail -n 30 "$WORK/cmake.log" "$WORK/build.log"; exit 1
fi
grep -i "mpi" "$WORK/cmake.log" | head -2
ls "$BUILD/lib/libcommscope.so" "$BUILD/bin/commscope" || { echo "FAIL: build products"; exit 1; }

elapsed
echo "== build overlap.cu"
if ! "$CUDA/bin/nvcc" -O2 -cudart shared -o "$WORK/overlap" "$ROOT/tests/gpu/overlap.cu" \
        -I"$NCCL_INC" -I"$CUDA/include" -L"$NCCL_LIB" -L"$WORK" -lnccl -ldl \
        -Xlinker -rpath -Xlinker "$NCCL_LIB" \
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

elapsed
echo "== steps run: NVTX ProfilerStep#N through the injection, NCCL send/recv to itself"
RUN2=$WORK/run-steps; rm -rf "$RUN2"
LD_LIBRARY_PATH=$NCCL_LIB:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-} RANK=0 WORLD_SIZE=1 LOCAL_RANK=0 \
    COMMSCOPE_DIR=$RUN2 LD_PRELOAD=$BUILD/lib/libcommscope.so \
    NVTX_INJECTION64_PATH=$BUILD/lib/libcommscope.so \
    timeout 120 "$WORK/overlap" 12 67108864 steps >"$WORK/steps.txt" 2>&1
src=$?
echo "exit $src"; cat "$WORK/steps.txt"
[ $src -eq 0 ] && echo "PASS: steps program ran unchanged under commscope" ||
    echo "FAIL: steps program exit status $src under commscope"
timeout 60 "$BUILD/bin/commscope" analyze "$RUN2" --json "$WORK/report-steps.json" \
    >"$WORK/analyze-steps.txt" 2>&1
echo "analyze exit $? (1: problems listed)"
sed -n '/^@--- Steps/,/^@--- Parallelism/p;/^@--- What-if/,/^$/p;/^@--- NCCL point/,/^$/p' \
    "$WORK/analyze-steps.txt" | head -60
grep -A8 "Problems" "$WORK/analyze-steps.txt" | head -12
python3 "$ROOT/tests/gpu/check_steps.py" "$WORK/report-steps.json" "$WORK/steps.txt"; scrc=$?

elapsed
echo "== commscope fabric --nccl auto (one rank)"
frc=0
if [ -x "$BUILD/bin/cs_fabric" ]; then
    # Open MPI's mpirun when there is one; else the benchmark as an MPI singleton (`env`).
    if command -v mpirun >/dev/null 2>&1; then
        set -- mpirun --allow-run-as-root --oversubscribe -np 1
    else
        set -- env
    fi
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        LD_LIBRARY_PATH=$NCCL_LIB:$CUDA/lib64:$CUDA/lib:${LD_LIBRARY_PATH:-} \
        COMMSCOPE_NCCL_LIB=$NCCL_LIB/libnccl.so.2 \
        timeout 120 "$BUILD/bin/commscope" fabric --nccl auto --max-bytes 4M \
        --json "$WORK/fabric.json" -- "$@" >"$WORK/fabric.txt" 2>&1
    echo "fabric exit $? (launcher: $*)"
    head -40 "$WORK/fabric.txt"
    python3 - "$WORK/fabric.json" <<'PY' || frc=1
import json, sys
try:
    doc = json.load(open(sys.argv[1]))
except (OSError, ValueError) as e:
    print("FAIL: fabric JSON readable: %s" % e); sys.exit(1)
nccl = doc.get("nccl") or {}
rows = [c for c in doc.get("collectives", []) if c.get("transport") == "nccl"]
ops = sorted({c["op"] for c in rows})
want = ["allgather", "allreduce", "alltoall", "reducescatter", "sendrecv"]
ok = nccl.get("available") is True and ops == want and all(c["time_us"] > 0 for c in rows)
print("%s: NCCL collectives rows in commscope fabric: available %r, %d rows, ops %s%s" % (
    "PASS" if ok else "FAIL", nccl.get("available"), len(rows), ops,
    "" if ok else ", reason %r" % nccl.get("reason")))
sys.exit(0 if ok else 1)
PY
else
    echo "SKIP: commscope fabric: cs_fabric was not built (no MPI at configure time; see" \
         "$WORK/cmake.log)"
fi
elapsed
echo "== PyTorch DDP (NCCL) under commscope run -- torchrun"
trc=0
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null &&
        command -v torchrun >/dev/null 2>&1; then
    TRUN=$WORK/run-torch; rm -rf "$TRUN"
    timeout 180 torchrun --standalone --nproc_per_node=1 "$ROOT/tests/gpu/torch_ddp.py" 12 \
        >"$WORK/torch-plain.txt" 2>&1
    echo "plain exit $?"; grep "^torch:" "$WORK/torch-plain.txt" || tail -n 20 "$WORK/torch-plain.txt"
    # The CUPTI that PyTorch loads (its own), not a second copy from the toolkit.
    env -u COMMSCOPE_CUPTI_LIB timeout 240 "$BUILD/bin/commscope" run -o "$TRUN" -- torchrun --standalone --nproc_per_node=1 \
        "$ROOT/tests/gpu/torch_ddp.py" 12 >"$WORK/torch.txt" 2>&1
    echo "commscope run exit $? (1: problems listed)"
    grep -v "^ " "$WORK/torch.txt" | head -40
    sed -n '/^@--- Steps/,/^$/p;/^@--- Time per step/,/^$/p' "$WORK/torch.txt" | head -30
    python3 "$ROOT/tests/gpu/check_torch.py" "$TRUN/report.json" "$WORK/torch-plain.txt" \
        "$WORK/torch.txt" || trc=1
else
    echo "SKIP: no PyTorch with CUDA, or no torchrun"
fi
elapsed
[ $rc -eq 0 ] && [ $crc -eq 0 ] && [ $src -eq 0 ] && [ $scrc -eq 0 ] && [ $frc -eq 0 ] && [ $trc -eq 0 ] &&
    { echo "GPU CHECK: PASS"; exit 0; }
echo "GPU CHECK: FAIL"; exit 1
