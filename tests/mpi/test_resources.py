#!/usr/bin/env python3
"""Resource use on real MPI jobs: the collector's samples (10 Hz by default) against what the
program measured itself, the analysis against the same samples decoded independently (the trace
reader of tests/nccl), and GPU figures from the NVML test double (tests/fakes/fake_nvml.c).

Usage: test_resources.py CASE; CS_BIN, CS_LIB name the build's bin/ and lib/ folders, CS_NVML the
folder of the NVML test double.  Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import re
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "nccl"))
import test_mpi as t  # noqa: E402
from test_nccl import read_trace  # noqa: E402  (the trace format, read independently)

check = t.check
# Two GPUs, constant figures: utilisation %, memory used and total MiB, power mW, SM MHz, PCI bus.
GPUS = [(35, 1000, 80000, 250000, 1980, 0x07), (90, 2000, 80000, 400000, 1755, 0x0f)]
NVML_ENV = {"FAKE_NVML_GPUS": ",".join("%d:%d:%d:%d:%d:%x" % g for g in GPUS)}


def nvml_env():
    d = os.environ.get("CS_NVML", "")
    env = dict(NVML_ENV)
    env["LD_LIBRARY_PATH"] = d + (":" + os.environ["LD_LIBRARY_PATH"]
                                  if os.environ.get("LD_LIBRARY_PATH") else "")
    return env


def spans(stdout):
    """{rank: (t0_ns, t1_ns, cpu0_ns, cpu1_ns)} from cs_train's steps_span lines."""
    out = {}
    for m in re.finditer(r"cs_train: rank (\d+) steps_span t0_ns=(\d+) t1_ns=(\d+) cpu0_ns=(\d+) "
                         r"cpu1_ns=(\d+)", stdout):
        out[int(m.group(1))] = tuple(int(m.group(i)) for i in range(2, 6))
    return out


def proc_samples(rundir):
    """{rank: [(t_local_ns, cpu_ns, rss_bytes)]} from the trace files, in recording order."""
    out = {}
    for path in sorted(glob.glob(os.path.join(rundir, "rank-*.cst"))):
        hdr, _, _ = read_trace(path)
        out[hdr["rank"]] = [(s["t_begin"], s["bytes_recv"], s["request"])
                            for s in hdr["samples"] if s["op"] == 210]
    return out


def case_train(tmp):
    """cs_train on 2 ranks, rank 1 slowed by busy compute, with two (test double) GPUs."""
    rundir = os.path.join(tmp, "run")
    p = t.commscope_run(rundir, t.MPIRUN + ["-np", "2", t.TRAIN, "--steps", "40", "--slow-rank",
                                            "1", "--slow-factor", "3"], env=nvml_env())
    rep = t.load_report(rundir)
    res = rep.get("resources")
    if not check(res is not None, "a resources section: %r" % sorted(rep)):
        return
    prog = spans(p.stdout)
    smp = proc_samples(rundir)
    check(sorted(prog) == [0, 1] and sorted(smp) == [0, 1],
          "both ranks printed their span (%r) and sampled (%r)" % (sorted(prog), sorted(smp)))
    by_rank = {x["rank"]: x for x in res["ranks"]}
    check(sorted(by_rank) == [0, 1], "both ranks in the section: %r" % sorted(by_rank))
    check(0 < res["hz"] <= 10.5, "the default rate, 10 Hz at most: %r" % res["hz"])
    for r in sorted(set(prog) & set(smp) & set(by_rank)):
        s, x = smp[r], by_rank[r]
        t0, t1, c0, c1 = prog[r]
        # The collector's CPU time and clock are the program's own: between the first and the
        # last sample inside the program's steps lies at most the CPU time the program measured
        # over them, and at least that less what every core could have done in the two edges
        # the samples leave out (CPU time never exceeds cores x wall time, however loaded).
        inside = [v for v in s if t0 <= v[0] <= t1]
        if check(len(inside) >= 2, "rank %d: samples inside its steps: %d" % (r, len(inside))):
            got = inside[-1][1] - inside[0][1]
            edges = (inside[0][0] - t0) + (t1 - inside[-1][0])
            check(got <= c1 - c0, "rank %d: CPU between the samples inside the steps %d ns <= "
                  "the program's own %d ns" % (r, got, c1 - c0))
            check(got >= c1 - c0 - edges * os.cpu_count(),
                  "rank %d: CPU between the samples %d ns >= the program's %d ns less %d ns of "
                  "edges x %d cores" % (r, got, c1 - c0, edges, os.cpu_count()))
        # The analysis from the same samples, decoded here independently (times on the rank's
        # own clock, which alignment may stretch by its drift: parts per million).
        check(x["samples"] == len(s), "rank %d: samples %r, trace %d" % (r, x["samples"], len(s)))
        span = (s[-1][0] - s[0][0]) / 1e9
        cpu = (s[-1][1] - s[0][1]) / 1e9
        # (JSON numbers carry 9 significant digits.)
        check(abs(x["cpu_s"] - cpu) <= 1e-8 * cpu, "rank %d: cpu_s %r, samples %r"
              % (r, x["cpu_s"], cpu))
        check(abs(x["span_s"] - span) <= 1e-5 * span + 1e-9,
              "rank %d: span_s %r, samples %r" % (r, x["span_s"], span))
        check(abs(x["cpu_util"] - cpu / span) <= 1e-5 * cpu / span,
              "rank %d: cpu_util %r, samples %r" % (r, x["cpu_util"], cpu / span))
        check(x["rss_peak_bytes"] == max(v[2] for v in s),
              "rank %d: rss peak %r" % (r, x["rss_peak_bytes"]))
        check(abs(x["rss_mean_bytes"] - sum(v[2] for v in s) / len(s)) <= 1,
              "rank %d: rss mean %r" % (r, x["rss_mean_bytes"]))
        series = [v for q in res["series"]["cpu"] if q["rank"] == r for v in q["values"]]
        check(len(series) == res["bins"] and any(v is not None for v in series),
              "rank %d: a CPU series of %d bins: %r" % (r, res["bins"], series[:5]))
    # The GPUs of the node, as the test double gives them, sampled once (the node's lowest rank).
    gpus = res["gpus"]
    check(len(gpus) == len(GPUS), "%d GPUs: %r" % (len(GPUS), gpus))
    for g, want in zip(gpus, GPUS):
        util, mem, total, mw, mhz, bus = want
        check(g["util_mean"] == util and g["util_min"] == util and g["util_max"] == util,
              "GPU %d utilisation %r" % (g["index"], g))
        check(g["mem_peak_bytes"] == mem << 20 and g["mem_total_bytes"] == total << 20,
              "GPU %d memory %r" % (g["index"], g))
        check(g["power_mean_w"] == mw / 1000 and g["sm_clock_mean_mhz"] == mhz,
              "GPU %d power and clock %r" % (g["index"], g))
        check(g["pci"] == "%02x:00.0" % bus, "GPU %d PCI %r" % (g["index"], g["pci"]))
        check(g["rank"] is None, "an MPI job on CPUs names no rank for GPU %d" % g["index"])
    for n in res["nics"]:
        if n["span_s"] > 0:
            check(abs(n["rx_gbps"] - n["rx_bytes"] * 8 / 1e9 / n["span_s"]) <= 1e-9 + 1e-9 *
                  n["rx_gbps"], "interface rate = bytes over span: %r" % n)
    # The verdict joins the straggler's CPU use to it.
    v = rep["verdict"]
    i = next((k for k, s in enumerate(v) if s.startswith("Rank 1 on ")), None)
    if check(i is not None, "rank 1 named the straggler: %r" % v):
        check(i + 1 < len(v) and v[i + 1].startswith("Rank 1's process kept"),
              "its CPU use follows: %r" % v[i:i + 2])
        m = re.search(r"kept ([0-9.]+) cores busy .*the other ranks' median ([0-9.]+)",
                      v[i + 1] if i + 1 < len(v) else "")
        if check(m is not None and 1 in by_rank and 0 in by_rank, "figures in %r" % v[i:i + 2]):
            check(m.group(1) == "%.2f" % by_rank[1]["cpu_util"] and
                  m.group(2) == "%.2f" % by_rank[0]["cpu_util"],
                  "rank 1's utilisation and the others' median (rank 0's): %r" % (m.groups(),))
    with open(os.path.join(rundir, "report.html")) as f:
        html = f.read()
    check('id="resources"' in html and "CPU utilisation" in html and "GPU utilisation" in html,
          "the HTML has the section and its charts")
    pf = os.path.join(tmp, "perfetto.json")
    txt = t.run([t.COMMSCOPE, "analyze", rundir, "--perfetto", pf], check_rc=0).stdout
    check("@--- Resource use" in txt, "the text report has the section")
    # Perfetto: a counter per interval and per sample, on each rank's process.
    with open(pf) as f:
        ev = json.load(f)["traceEvents"]
    for r, s in smp.items():
        cpu = [e for e in ev if e["ph"] == "C" and e["pid"] == r and e["name"] == "CPU cores"]
        check(len(cpu) == len(s) - 1, "rank %d: %d CPU counters for %d samples"
              % (r, len(cpu), len(s)))
    for i, want in enumerate(GPUS):
        u = {e["args"]["value"] for e in ev if e["ph"] == "C" and e["name"] == "GPU %d util %%" % i}
        check(u == {want[0]}, "GPU %d's utilisation counter: %r" % (i, u))


def case_off(tmp):
    """COMMSCOPE_SAMPLE_HZ=0: no samples, no section; an NVML that does not start: one warning,
    no GPU, the job unchanged."""
    rundir = os.path.join(tmp, "off")
    t.commscope_run(rundir, t.MPIRUN + ["-np", "2", t.TRAIN, "--steps", "4"],
                    env={"COMMSCOPE_SAMPLE_HZ": "0"})
    rep = t.load_report(rundir)
    check("resources" not in rep, "no section without samples")
    check(all(not read_trace(f)[0]["samples"] for f in glob.glob(os.path.join(rundir, "*.cst"))),
          "no sample records")
    rundir = os.path.join(tmp, "nvml-fails")
    env = nvml_env()
    env["FAKE_NVML_FAIL"] = "init"
    p = t.commscope_run(rundir, t.MPIRUN + ["-np", "2", t.TRAIN, "--steps", "4"], env=env)
    rep = t.load_report(rundir)
    check(rep.get("resources") and not rep["resources"]["gpus"] and rep["resources"]["ranks"],
          "CPU samples without GPUs: %r" % rep.get("resources", {}).get("gpus"))
    check(p.stderr.count("NVML did not start") == 1, "one warning: %r" % p.stderr[-2000:])
    rundir = os.path.join(tmp, "bad-rate")
    p = t.commscope_run(rundir, t.MPIRUN + ["-np", "2", t.TRAIN, "--steps", "4"],
                        env={"COMMSCOPE_SAMPLE_HZ": "ten"})
    check("COMMSCOPE_SAMPLE_HZ" in p.stderr, "a bad rate is said: %r" % p.stderr[-2000:])
    check("resources" not in t.load_report(rundir), "and no samples are taken")


def case_nvtx(tmp):
    """cs_train --nvtx (NVTX ranges named as Megatron-LM's timers) with rank 1 slowed by busy
    compute: the step phases of each rank inside the program's own brackets around every push and
    pop, and the resource samples of the same run (the slowed rank's CPU time bracketed by its
    own)."""
    rundir = os.path.join(tmp, "nvtx")
    p = t.run([t.COMMSCOPE, "run", "-o", rundir, "--quiet", "--"] + t.MPIRUN +
              ["-np", "2", t.TRAIN, "--steps", "12", "--steps-marker", "--nvtx", "--slow-rank",
               "1", "--slow-factor", "3"])
    if "built without the NVTX header" in p.stderr:
        print("skip: cs_train built without NVTX (no /usr/local/cuda/include/nvtx3)")
        raise SystemExit(77)
    check(p.returncode == 0, "commscope run exit %d: %s" % (p.returncode, p.stderr[-2000:]))
    rep = t.load_report(rundir)
    ph = rep.get("phases")
    if not check(ph is not None, "a phases section: %r" % sorted(rep)):
        return
    truth = {}
    for m in re.finditer(r"cs_train: rank (\d+) phase (\S+) step (\d+) a=(\d+) b=(\d+) c=(\d+) "
                         r"d=(\d+)", p.stdout):
        truth.setdefault(int(m.group(1)), {}).setdefault(m.group(2), {})[int(m.group(3))] = \
            tuple(int(m.group(i)) for i in range(4, 8))
    names = {"forward": "forward-compute", "backward": "backward-compute",
             "optimizer": "optimizer"}
    slack = 10000  # ns per edge: the clock conversion onto rank 0's clock (same host)
    for x in ph["ranks"]:
        r, n = x["rank"], x["steps"]
        # Steps from the first marker on, each closed by the next: the program's steps 0..n-1.
        check(n == 11, "rank %d: 11 closed steps of 12: %r" % (r, n))
        for phase, name in names.items():
            br = [truth.get(r, {}).get(name, {}).get(k) for k in range(n)]
            if not check(all(br), "rank %d: the program's brackets of %s" % (r, name)):
                continue
            lo = sum(c - b for a, b, c, d in br) / 1e9 - 2 * n * slack / 1e9
            hi = sum(d - a for a, b, c, d in br) / 1e9 + 2 * n * slack / 1e9
            check(lo <= x["time_s"][phase] <= hi, "rank %d: %s %.6f s inside the program's "
                  "[%.6f, %.6f]" % (r, phase, x["time_s"][phase], lo, hi))
        parts = sum(x["time_s"].values())
        check(abs(parts - x["step_s"]) <= 1e-8 * x["step_s"] + 1e-9,  # 9-digit JSON numbers
              "rank %d: the phases add up to the step time: %r" % (r, x))
    # Perfetto: the "phases" track's slices inside the steps the report closed add up to its
    # phase times (slice times are whole ns, written in us with three decimals).
    pf = os.path.join(tmp, "nvtx.json")
    t.run([t.COMMSCOPE, "analyze", rundir, "--perfetto", pf, "--quiet"], check_rc=0)
    with open(pf) as f:
        ev = json.load(f)["traceEvents"]
    for x in ph["ranks"]:
        r, n = x["rank"], x["steps"]
        steps = sorted((e for e in ev if e["ph"] == "X" and e["pid"] == r and
                        e.get("cat") == "step"), key=lambda e: e["ts"])
        if not check(len(steps) >= n, "rank %d: %d step slices" % (r, len(steps))):
            continue
        got = {}
        for e in ev:
            if e["ph"] == "X" and e["pid"] == r and e.get("cat") == "phase" and \
                    e["args"]["step"] < n:
                got[e["name"]] = got.get(e["name"], 0) + e["dur"] / 1e6
        for phase, v in x["time_s"].items():
            check(abs(got.get(phase, 0) - v) <= 1e-8 * v + 2e-9 * (1 + 4 * n),
                  "rank %d: %s slices %.9f s, report %.9f s" % (r, phase, got.get(phase, 0), v))
    # The slowed rank's phases are its own work: longer than the other's.
    by = {x["rank"]: x for x in ph["ranks"]}
    if 0 in by and 1 in by:
        check(by[1]["time_s"]["forward"] > by[0]["time_s"]["forward"],
              "rank 1's forward is slower: %r" % {r: by[r]["time_s"] for r in by})
    res = rep.get("resources") or {}
    got = {x["rank"]: x for x in res.get("ranks", [])}
    prog = spans(p.stdout)
    smp = proc_samples(rundir)
    for r in (0, 1):
        if not check(r in got and r in prog and r in smp, "rank %d sampled" % r):
            continue
        t0, t1, c0, c1 = prog[r]
        inside = [v for v in smp[r] if t0 <= v[0] <= t1]
        if len(inside) >= 2:
            check(inside[-1][1] - inside[0][1] <= c1 - c0,
                  "rank %d: sampled CPU inside the steps within the program's own" % r)
        print("rank %d: CPU utilisation %.2f (max %.2f)" % (r, got[r]["cpu_util"],
                                                          got[r]["cpu_util_max"]))


CASES = {"train": case_train, "off": case_off, "nvtx": case_nvtx}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_resources.py {%s}" % "|".join(CASES), file=sys.stderr)
        return 2
    if not shutil.which(t.MPIRUN[0]):
        print("skip: %s not found" % t.MPIRUN[0])
        return 77
    tmp = tempfile.mkdtemp(prefix="cs-res-")
    try:
        CASES[sys.argv[1]](tmp)
    finally:
        if not t.failures:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp, file=sys.stderr)
    if t.failures:
        print("%d checks failed" % len(t.failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
