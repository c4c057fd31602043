#!/usr/bin/env python3
"""GPU check, the newer paths (tests/gpu/run.sh): the report of overlap.cu run with `steps` under
libcommscope.so as preload and NVTX injection, against the program's own numbers.  Prints
PASS/FAIL lines for: NVTX step ranges recorded through the injection (steps source nvtx, the
program's count); the per-step GPU budget (its parts sum to the step time; step time and overlap
consistent with the program's host clock and CUDA events); the GPU what-if replay reproducing the
measured step within 5 %; the NCCL send/receive to itself matched on GPU time.

Usage: check_steps.py REPORT_JSON PROGRAM_OUTPUT_FILE
"""
import json
import sys

from gpucheck import budget_parts, finish, num, verdict




def main():
    rep_path, progout = sys.argv[1], sys.argv[2]
    prog, st = {}, {}
    for line in open(progout):
        w = line.split()
        if w and w[0] == "program:":
            prog = {w[k]: float(w[k + 1]) for k in range(1, len(w) - 1, 2)}
        elif w and w[0] == "steps:":
            st = {w[k]: float(w[k + 1]) for k in range(1, len(w) - 1, 2)}
    verdict(prog and st, "program printed its timings: %s %s" % (prog, st))
    try:
        rep = json.load(open(rep_path))
    except (OSError, ValueError) as e:
        verdict(False, "report %s readable: %s" % (rep_path, e))
        return
    n = int(st.get("iterations", 0))
    s = rep.get("steps") or {}
    verdict(s.get("source") == "nvtx" and s.get("count") == n,
            "NVTX steps through the injection: source %r, count %r (program: %d ProfilerStep#N "
            "ranges)" % (s.get("source"), s.get("count"), n))
    # The per-step budget on the GPU timeline: its parts are the step.
    b = (rep.get("budget") or {}).get("total") or {}
    parts = budget_parts(b)
    step = num(b.get("step_s"))
    print("budget: %s" % json.dumps(b))
    verdict(step > 0 and abs(parts - step) <= 1e-6 * step + 1e-9,
            "budget parts sum to the step: %.6f s of %.6f s" % (parts, step))
    pm = st.get("step_ms_mean", 0) / 1e3
    verdict(step > 0 and abs(step - pm) <= 0.05 * pm + 2e-4,
            "budget step time %.6f s consistent with the program's host-clock mean %.6f s"
            % (step, pm))
    verdict(num(b.get("compute_s")) > 0.5 * step,
            "compute (the spin kernel, ~3 ms of each step) dominates the step: %.6f s of %.6f s"
            % (num(b.get("compute_s")), step))
    ratio, pc, po = rep.get("overlap_ratio"), prog.get("comm_ms", 0), prog.get("overlap_ms", 0)
    pratio = po / pc if pc > 0 else None
    verdict(isinstance(ratio, (int, float)) and pratio is not None and abs(ratio - pratio) <= 0.2,
            "step overlap ratio %r consistent with the CUDA events' %r (within 0.2)"
            % (ratio, pratio))
    w = rep.get("whatif") or {}
    err = w.get("replay_error")
    verdict((w.get("note") or "").startswith("replayed on the GPU timelines") and
            isinstance(err, (int, float)) and abs(err) <= 0.05,
            "GPU what-if replay within 5 %% of the measured step: measured %r replayed %r "
            "error %r note %r" % (w.get("measured_step_s"), w.get("replayed_step_s"), err,
                                  w.get("note")))
    p = rep.get("nccl_p2p") or {}
    ch = [c for c in p.get("channels", []) if c.get("from") == 0 and c.get("to") == 0]
    want = n * int(st.get("p2p_bytes_per_step", 0))
    verdict(p.get("pairs") == n and p.get("timed_pairs") == n and len(ch) == 1 and
            ch[0].get("bytes") == want,
            "NCCL send/recv to itself matched and timed: pairs %r timed %r channel bytes %r "
            "(want %d pairs, %d bytes)" % (p.get("pairs"), p.get("timed_pairs"),
                                           ch[0].get("bytes") if ch else None, n, want))
    verdict(p.get("late_sender") == 0 and p.get("late_receiver") == 0,
            "one group kernel holds both sides: no wait (late sender %r, late receiver %r)"
            % (p.get("late_sender"), p.get("late_receiver")))


if __name__ == "__main__":
    main()
    finish()
