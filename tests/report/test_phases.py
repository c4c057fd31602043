#!/usr/bin/env python3
"""Step phases of real PyTorch profiler traces (CS_SHARED_DATA/kineto; exit 77 when absent):
DistributedDataParallel.forward, autograd::engine::evaluate_function, Optimizer.step#... and
Optimizer.zero_grad#... time against independent sums over the same JSON, the phases adding up
to the step time, and COMMSCOPE_PHASE_NVTX moving an annotation to another phase.

Usage: test_phases.py SHARED_DATA; CS_BIN names the build's bin/ folder.
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_reports  # noqa: E402
from test_reports import check, failures  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
# (name prefix, the report's label, phase): the defaults the traces use
KNOWN = [("DistributedDataParallel.forward", "DistributedDataParallel.forward", "forward"),
         ("autograd::engine::evaluate_function", "autograd::engine::evaluate_function",
          "backward"),
         ("Optimizer.step#", "Optimizer.step", "optimizer"),
         ("Optimizer.zero_grad#", "Optimizer.zero_grad", "optimizer"),
         ("enumerate(DataLoader)", "enumerate(DataLoader)", "data")]


def sums(path):
    """Per label: (spans, µs) of the CPU annotations inside the profiled steps."""
    with gzip.open(path) as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    lo, hi = min(s[0] for s in steps), max(s[1] for s in steps)
    out = {}
    for e in evs:
        if e.get("cat") == "gpu_user_annotation" or not lo <= e["ts"] < hi:
            continue
        for prefix, label, _ in KNOWN:
            if e["name"].startswith(prefix):
                n, us = out.get(label, (0, 0.0))
                out[label] = (n + 1, us + e["dur"])
    return len(steps), out


GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def steps_and_phases(evs):
    """The profiled steps [(begin, end)] and the phase annotations [(begin, end, phase)] (CPU
    ones) of a trace's complete events, in us."""
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in evs
             if e["name"].startswith("ProfilerStep#") and e.get("cat") == "user_annotation"]
    ann = []
    for e in evs:
        if e.get("cat") in ("gpu_user_annotation",) + GPU_CATS:
            continue
        ph = next((p for prefix, _, p in KNOWN if e["name"].startswith(prefix)), None)
        if ph:
            ann.append((e["ts"], e["ts"] + e["dur"], ph))
    return steps, ann


def gpu_by_phase(path):
    """Independently of the import: per phase, the GPU time of the kernels, copies and sets (not
    NCCL's) whose launching runtime call (same correlation id) lies inside a profiled step, by
    the innermost phase annotation open on the rank at the launch (the latest begun of those
    open; none: other); and the time of those whose launch is not in the trace.  In us, with the
    number of records summed."""
    with gzip.open(path) as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps, ann = steps_and_phases(evs)
    launch = {e["args"]["correlation"]: e["ts"] for e in evs
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and
              "correlation" in e.get("args", {})}
    out, unplaced, n = {}, 0.0, 0
    for e in evs:
        if e.get("cat") not in GPU_CATS or "nccl" in e["name"].lower():
            continue
        t = launch.get(e.get("args", {}).get("correlation"))
        n += 1
        if t is None:
            unplaced += e["dur"]
        elif any(a <= t < b for a, b in steps):
            inside = [x for x in ann if x[0] <= t < x[1]]
            ph = max(inside, key=lambda x: x[0])[2] if inside else "other"
            out[ph] = out.get(ph, 0.0) + e["dur"]
    return out, unplaced, n


def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def minus(A, B):
    out = []
    for a, b in A:
        cur = a
        for c, d in B:
            if d <= cur or c >= b:
                continue
            if c > cur:
                out.append((cur, c))
            cur = max(cur, d)
        if cur < b:
            out.append((cur, b))
    return out


def exposed_by_phase(path):
    """Independently: per GPU, the NCCL kernels' union less the compute kernels' union, each
    stretch split by the phase the rank was in (as gpu_by_phase, at every instant), inside the
    profiled steps; in us."""
    with gzip.open(path) as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    steps, ann = steps_and_phases(evs)
    cuts = sorted({p for a, b, _ in ann for p in (a, b)} | {p for a, b in steps for p in (a, b)})
    devs = {}
    for e in evs:
        if e.get("cat") == "kernel":
            d = devs.setdefault(e.get("args", {}).get("device", 0), ([], []))
            d["nccl" in e["name"].lower()].append((e["ts"], e["ts"] + e["dur"]))
    out = {}
    for comp, comm in devs.values():
        for a, b in minus(union(comm), union(comp)):
            pts = [a] + [p for p in cuts if a < p < b] + [b]
            for x, y in zip(pts, pts[1:]):
                if not any(s <= x < t for s, t in steps):
                    continue
                inside = [z for z in ann if z[0] <= x < z[1]]
                ph = max(inside, key=lambda z: z[0])[2] if inside else "other"
                out[ph] = out.get(ph, 0.0) + (y - x)
    return out


def analyze(path, tmp, env=None):
    js = os.path.join(tmp, "r.json")
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto", path,
                        "--json", js, "--html", os.path.join(tmp, "r.html")],
                       capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, **(env or {})))
    if not check(p.returncode in (0, 1) and os.path.exists(js),
                 "analyze %s: %d %s" % (path, p.returncode, p.stderr[-1000:])):
        return None, p
    with open(js) as f:
        return json.load(f), p


def main():
    if len(sys.argv) < 2:
        print("usage: test_phases.py SHARED_DATA", file=sys.stderr)
        return 2
    path = os.path.join(sys.argv[1], "kineto", "hta", "nccl_parser_config_nccl_data.json.gz")
    if not os.path.exists(path):
        print("skipped: %s absent" % path, file=sys.stderr)
        return 77
    nsteps, want = sums(path)
    print("independent sums over %d steps: %s" % (nsteps, want))
    with tempfile.TemporaryDirectory() as tmp:
        rep, p = analyze(path, tmp)
        if rep is None:
            return 1
        ph = rep.get("phases")
        if not check(ph is not None and len(ph["ranks"]) == 1, "phases %r" % ph):
            return test_reports.verdict(failures)
        names = {m["name"]: m for m in ph["names"]}
        check(set(names) == set(want), "names %s vs %s" % (sorted(names), sorted(want)))
        for label, (n, us) in want.items():
            m = names.get(label)
            if not check(m is not None, "no row for %s" % label):
                continue
            # exact up to each span's rounding to whole nanoseconds
            check(m["ranges"] == n and abs(m["time_s"] - us / 1e6) <= n * 1e-9,
                  "%s: %r vs %d spans, %.3f us" % (label, m, n, us))
        x = ph["ranks"][0]
        check(x["steps"] == nsteps, "steps %r vs %d" % (x["steps"], nsteps))
        for phase in ("data", "forward", "backward", "optimizer"):
            total = sum(us for label, (_, us) in want.items()
                        for _, lb, ph_ in KNOWN if lb == label and ph_ == phase)
            check(abs(x["time_s"][phase] - total / 1e6) <= 1e-6,
                  "phase %s %r vs %.3f us" % (phase, x["time_s"][phase], total))
        check(abs(sum(x["time_s"].values()) - x["step_s"]) <= 1e-9 * 10,
              "phases add up to the step time %r" % x)
        check(all(v is None for v in x["comm_s"].values()),
              "a GPU timeline's host calls are not its communication %r" % x["comm_s"])
        # GPU work by the phase that launched it (correlation ids), against the JSON itself.
        gpu, unplaced, nk = gpu_by_phase(path)
        for phase in ("data", "forward", "backward", "optimizer", "other"):
            check(abs(x["gpu_s"][phase] - gpu.get(phase, 0) / 1e6) <= nk * 1e-9,
                  "GPU time launched in %s: %r vs %.3f us" % (phase, x["gpu_s"][phase],
                                                              gpu.get(phase, 0)))
        check(abs(x["gpu_unplaced_s"] - unplaced / 1e6) <= nk * 1e-9,
              "GPU time without its launch: %r vs %.3f us" % (x["gpu_unplaced_s"], unplaced))
        exp = exposed_by_phase(path)
        for phase in ("data", "forward", "backward", "optimizer", "other"):
            check(abs(x["gpu_exposed_comm_s"][phase] - exp.get(phase, 0) / 1e6) <= nk * 1e-9,
                  "exposed GPU communication in %s: %r vs %.3f us"
                  % (phase, x["gpu_exposed_comm_s"][phase], exp.get(phase, 0)))
        check("Step phases" in p.stdout and "Optimizer.step" in p.stdout, "text section")
        with open(os.path.join(tmp, "r.html")) as f:
            check('id="phases"' in f.read(), "HTML section")
        # COMMSCOPE_PHASE_NVTX comes first: zero_grad as data loading, a bad item named
        rep2, p2 = analyze(path, tmp, {"COMMSCOPE_PHASE_NVTX":
                                       "data=Optimizer.zero_grad*;bogus=x"})
        if rep2 is not None and rep2.get("phases"):
            y = rep2["phases"]["ranks"][0]
            zg = want["Optimizer.zero_grad"][1] / 1e6
            check(abs(y["time_s"]["data"] - zg) <= 1e-6 and
                  abs(y["time_s"]["optimizer"] - (x["time_s"]["optimizer"] - zg)) <= 1e-6,
                  "zero_grad moved to data %r" % y["time_s"])
            check(rep2["phases"]["patterns"] == "data=Optimizer.zero_grad*;bogus=x",
                  "patterns %r" % rep2["phases"]["patterns"])
            check("COMMSCOPE_PHASE_NVTX: 'bogus=x' is not phase=pattern" in p2.stderr,
                  "problem named %r" % p2.stderr[-600:])
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
