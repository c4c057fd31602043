#!/usr/bin/env python3
"""GPU check (tests/gpu/run.sh): read the trace of overlap.cu and print PASS/FAIL lines.

Usage: check.py RUN_DIR PROGRAM_OUTPUT_FILE
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "nccl"))
from test_nccl import read_trace  # noqa: E402
from gpucheck import finish, verdict  # noqa: E402

OP_ALLREDUCE, OP_GPU_KERNEL, OP_GPU_MEMCPY, OP_GPU_MEMSET, OP_GPU_NCCL = 128, 192, 193, 194, 195


def union(iv):
    out = []
    for b, e in sorted(iv):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def overlap(a, b):
    """Total length of (union of a) ∩ (union of b)."""
    a, b = union(a), union(b)
    i = j = 0
    tot = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def main():
    run, progout = sys.argv[1], sys.argv[2]
    prog = {}
    for line in open(progout):
        w = line.split()
        if w and w[0] == "program:":
            prog = {w[k]: float(w[k + 1]) for k in range(1, len(w) - 1, 2)}
    verdict(bool(prog), "program printed its own CUDA-event timings: %s" % prog)
    path = os.path.join(run, "rank-00000.cst")
    if not os.path.exists(path):
        verdict(False, "trace %s exists (files: %s)" % (
            path, os.listdir(run) if os.path.isdir(run) else "no run directory"))
        return
    hdr, events, comms = read_trace(path)
    print("trace: nccl_version %d gpu_timing %d gpu_dropped %d note %r" % (
        hdr["nccl_version"], hdr["gpu_timing"], hdr["gpu_dropped"], hdr["gpu_note"]))
    by_op = {}
    for e in events:
        by_op.setdefault(e["op"], []).append(e)
    for op in sorted(by_op):
        print("  op %d: %d events" % (op, len(by_op[op])))
    n = int(prog.get("iterations", 0))
    verdict(hdr["gpu_timing"] == 1, "GPU timed by CUPTI (gpu_timing %d)" % hdr["gpu_timing"])
    kernels = by_op.get(OP_GPU_KERNEL, [])
    verdict(len(kernels) >= n + 1, "compute kernels captured: %d (program launched %d)"
            % (len(kernels), n + 1))
    calls = by_op.get(OP_ALLREDUCE, [])
    gpu = by_op.get(OP_GPU_NCCL, [])
    launches = {e["request"] for e in calls}
    mapped = [g for g in gpu if g["request"] in launches]
    covered = {g["request"] for g in mapped}
    verdict(len(calls) == n + 1 and len(covered) == len(launches) and len(mapped) >= n + 1,
            "NCCL kernels mapped to calls: %d all-reduce calls, %d NCCL kernels, %d mapped, "
            "%d calls with a kernel" % (len(calls), len(gpu), len(mapped), len(covered)))
    comm_ids = {e["comm"] for e in calls}
    verdict(all(g["comm"] in comm_ids and g["comm"] != 0 for g in mapped),
            "NCCL kernels carry the call's communicator id")
    bad = [g for g in mapped for c in calls if c["request"] == g["request"]
           and g["t_begin"] < c["t_begin"]]
    verdict(not bad, "every NCCL kernel starts after its call was entered (host clock mapping): "
            "%d violations" % len(bad))
    # Overlap over the measured iterations: the kernels after the warm-up launch.
    first = sorted(calls, key=lambda e: e["t_begin"])[1]["t_begin"] if len(calls) > 1 else 0
    comm_iv = [(g["t_begin"], g["t_end"]) for g in mapped if g["t_begin"] >= first]
    comp_iv = [(k["t_begin"], k["t_end"]) for k in kernels if k["t_begin"] >= first]
    comm_ms = sum(e - b for b, e in union(comm_iv)) / 1e6
    comp_ms = sum(e - b for b, e in union(comp_iv)) / 1e6
    ov_ms = overlap(comm_iv, comp_iv) / 1e6
    print("traced:  comm_ms %.4f compute_ms %.4f overlap_ms %.4f exposed_ms %.4f"
          % (comm_ms, comp_ms, ov_ms, comm_ms - ov_ms))
    print("program: comm_ms %.4f compute_ms %.4f overlap_ms %.4f"
          % (prog.get("comm_ms", 0), prog.get("compute_ms", 0), prog.get("overlap_ms", 0)))
    verdict(ov_ms > 0, "overlap measured > 0 (%.4f ms)" % ov_ms)
    # CUDA events bracket the kernels (launch gaps included), so the kernel times are at most the
    # event times and close to them.
    tol = 0.05 * n  # 50 us per iteration
    pc, pp, po = prog.get("comm_ms", 0), prog.get("compute_ms", 0), prog.get("overlap_ms", 0)
    verdict(comm_ms <= pc + tol and comm_ms >= 0.5 * pc - tol,
            "traced NCCL kernel time %.4f ms consistent with the events' %.4f ms" % (comm_ms, pc))
    verdict(abs(comp_ms - pp) <= 0.05 * pp + tol,
            "traced compute time %.4f ms within 5%% of the events' %.4f ms" % (comp_ms, pp))
    verdict(ov_ms <= po + tol and ov_ms >= 0.5 * po - tol,
            "traced overlap %.4f ms consistent with the events' %.4f ms" % (ov_ms, po))


if __name__ == "__main__":
    main()
    finish()
