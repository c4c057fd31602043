#!/usr/bin/env python3
"""GPU check (tests/gpu/run.sh): torch_ddp.py run plainly and under `commscope run -- torchrun`.
Prints PASS/FAIL lines for: the training's result unchanged under commscope (loss and weight
checksum identical); NVTX ProfilerStep#N ranges from PyTorch recorded as the steps; NCCL
all-reduces intercepted (DDP's gradient buckets and the loss, at least two a step); the per-step
budget on the GPU timeline (CUPTI kernels: idle_s measured, parts summing to the step, step time
consistent with the program's own clock); no trace problems.  The slowdown is printed, not
judged (one run each).

Usage: check_torch.py REPORT_JSON PLAIN_OUTPUT TRACED_OUTPUT
"""
import json
import sys

from gpucheck import budget_parts, finish, num, verdict




def prog_line(path):
    try:
        for line in open(path):
            w = line.split()
            if w and w[0] == "torch:":
                return {w[k]: w[k + 1] for k in range(1, len(w) - 1, 2)}
    except OSError:
        pass
    return {}


def main():
    rep_path, plain_path, traced_path = sys.argv[1:4]
    plain, traced = prog_line(plain_path), prog_line(traced_path)
    verdict(plain and traced, "both runs printed their result: plain %s, traced %s"
            % (plain, traced))
    if not (plain and traced):
        return
    verdict(plain["loss"] == traced["loss"] and plain["checksum"] == traced["checksum"],
            "training result unchanged under commscope: loss %s / %s, weight checksum %s / %s"
            % (plain["loss"], traced["loss"], plain["checksum"], traced["checksum"]))
    pm, tm = float(plain["step_ms_mean"]), float(traced["step_ms_mean"])
    print("INFO: step time plain %.3f ms, under commscope %.3f ms (%+.1f %%; one run each)"
          % (pm, tm, (tm / pm - 1) * 100 if pm > 0 else 0))
    try:
        rep = json.load(open(rep_path))
    except (OSError, ValueError) as e:
        verdict(False, "report %s readable: %s" % (rep_path, e))
        return
    n = int(traced["steps"])
    s = rep.get("steps") or {}
    verdict(s.get("source") == "nvtx" and s.get("count") == n,
            "PyTorch's NVTX ranges (torch.cuda.nvtx) are the steps: source %r, count %r "
            "(program: %d)" % (s.get("source"), s.get("count"), n))
    ops = rep.get("ops") or []
    print("INFO: ops %s" % ", ".join("%s %s calls %d bytes %d" % (
        o.get("op"), o.get("comm"), o.get("calls", 0), o.get("bytes", 0)) for o in ops))
    ar = sum(o.get("calls", 0) for o in ops if o.get("op") == "ncclAllReduce")
    verdict(ar >= 2 * (n + 1),
            "NCCL all-reduces intercepted: %d (want at least 2 per step over %d steps and the "
            "warm-up: gradient buckets and the loss)" % (ar, n))
    b = (rep.get("budget") or {}).get("total") or {}
    print("budget: %s" % json.dumps(b))
    step = num(b.get("step_s"))
    parts = budget_parts(b)
    verdict(isinstance(b.get("idle_s"), (int, float)) and num(b.get("compute_s")) > 0,
            "GPU timeline from CUPTI kernels: compute %.6f s, idle %r s per step"
            % (num(b.get("compute_s")), b.get("idle_s")))
    verdict(step > 0 and abs(parts - step) <= 1e-6 * step + 1e-9,
            "budget parts sum to the step: %.6f s of %.6f s" % (parts, step))
    verdict(step > 0 and abs(step - tm / 1e3) <= 0.1 * tm / 1e3 + 5e-4,
            "budget step time %.6f s consistent with the program's clock %.6f s"
            % (step, tm / 1e3))
    print("INFO: gradient_sync %s" % json.dumps(rep.get("gradient_sync")))
    print("INFO: overlap_ratio %r" % rep.get("overlap_ratio"))
    probs = (rep.get("trace") or {}).get("problems") or []
    verdict(not probs, "no trace problems: %s" % probs)


if __name__ == "__main__":
    main()
    finish()
