#!/usr/bin/env python3
"""GPU timing tests without a GPU: tests/nccl/nccl_gpu.c on the fake CUDA runtime and CUPTI and
the CPU NCCL (tests/fakes/), two processes launched without MPI under LD_PRELOAD=libcommscope.so.
The fake runtime logs every piece of GPU work it ran, with its scripted times on the host clock
(FAKE_CUDA_LOG); the traces must hold exactly that work, mapped to the host clock, NCCL kernels
tied to the calls that launched them.

Cases:
  cupti          CUPTI stamps with commscope's clock (timestamp callback)
  cupti_offset   CUPTI has no timestamp callback: its own clock (123456789 s ahead) is mapped
  cupti_corrupt  CUPTI also hands over impossible and foreign records: skipped, said, counted
  events         CUPTI refuses the subscriber (another tool): NCCL launches timed by CUDA events
  fuzz           the traces of these cases, damaged, as seeds of the fuzzer (tests/unit/test_fuzz.c)

Usage: test_gpu.py CASE; CS_BIN, CS_LIB, CS_TESTBIN, CS_FAKE_CUPTI from ctest.
Exit 0 pass, 1 fail.
"""
import collections
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nccl as T  # noqa: E402  (trace reader, analyze, check)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NP = 2
ITERS = 3
MS = 1000000
# Mapping tolerance for start times on the host clock.  CUPTI's own clock in the fake is 1.2e17 ns
# away from the host's, and the scripted work is milliseconds apart, so a wrong mapping or a wrong
# match cannot pass; CUPTI durations must be exact.
START_TOL = 1 * MS
EV_GPU_EVENTS, EV_GRAPH, EV_GROUPED = 1 << 8, 1 << 9, 1 << 7
GPU_CUPTI, GPU_EVENTS = 1, 2


def op_ids():
    ids = {}
    with open(os.path.join(ROOT, "include", "commscope", "ops.def")) as f:
        for m in re.finditer(r'CS_OP\(\s*\w+,\s*(\d+),\s*"(\w+)"', f.read()):
            ids[m.group(2)] = int(m.group(1))
    return ids


OPS = op_ids()


def run(case_env):
    tmp = tempfile.mkdtemp(prefix="cs-gpu-")
    rundir = os.path.join(tmp, "run")
    exch = os.path.join(tmp, "x")
    shm = os.path.join(tmp, "shm")
    os.makedirs(exch)
    os.makedirs(shm)
    procs = []
    for r in range(NP):
        env = dict(os.environ)
        env.update({"RANK": str(r), "WORLD_SIZE": str(NP), "LOCAL_RANK": str(r),
                    "LD_PRELOAD": T.COLLECTOR, "COMMSCOPE_DIR": rundir, "FAKE_NCCL_DIR": shm,
                    "FAKE_CUDA_LOG": os.path.join(tmp, "truth-%d.txt" % r),
                    "COMMSCOPE_CUPTI_LIB": os.environ["CS_FAKE_CUPTI"]})
        env.update(case_env)
        procs.append(subprocess.Popen([os.path.join(T.TESTBIN, "cs_nccl_gpu"), exch, str(ITERS)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    outs = []
    for r, p in enumerate(procs):
        so, se = p.communicate(timeout=90)
        outs.append((p.returncode, so, se))
        T.check(p.returncode == 0, "rank %d exits 0 (%d): %s" % (r, p.returncode, se[-1500:]))
    truth = {}
    for r in range(NP):
        work, stats = [], {}
        for line in open(os.path.join(tmp, "truth-%d.txt" % r)):
            w = line.split()
            if w[0] == "work":
                d = dict(zip(w[3::2], w[4::2]))
                work.append(dict(kind=w[1], name=w[2], dev=int(d["dev"]),
                                 stream=int(d["stream"]), graph=int(d["graph"]),
                                 start=int(d["start"]), end=int(d["end"]),
                                 bytes=int(d["bytes"]), launch=int(d.get("launch", 0))))
            elif w[0] == "stats":
                stats = {k: int(v) for k, v in zip(w[1::2], w[2::2])}
        truth[r] = (work, stats)
    traces = {}
    for r in range(NP):
        path = os.path.join(rundir, "rank-%05d.cst" % r)
        if T.check(os.path.exists(path), "trace of rank %d written" % r):
            traces[r] = T.read_trace(path)
    return rundir, outs, truth, traces


def match(truth_items, records, what, exact_duration=True):
    """One record per truth item: nearest start, |start difference| <= START_TOL, duration exact
    (unless exact_duration is False).  Returns {index of truth item: record}."""
    left = list(records)
    got = {}
    for i, t in enumerate(truth_items):
        best = min(left, key=lambda e: abs(e["t_begin"] - t["start"]), default=None)
        if not T.check(best is not None, "%s: a record for %s at %d" % (what, t["name"],
                                                                         t["start"])):
            continue
        left.remove(best)
        got[i] = best
        T.check(abs(best["t_begin"] - t["start"]) <= START_TOL,
                "%s: %s starts at %d on the host clock, recorded %d (off by %d ns)"
                % (what, t["name"], t["start"], best["t_begin"], best["t_begin"] - t["start"]))
        dur, want = best["t_end"] - best["t_begin"], t["end"] - t["start"]
        T.check(dur == want or not exact_duration,
                "%s: %s lasted %d ns, recorded %d" % (what, t["name"], want, dur))
    T.check(not left, "%s: %d records the GPU never ran: %s" % (what, len(left), left[:3]))
    return got


def no_harm(truth):
    for r, (work, stats) in truth.items():
        T.check(stats.get("syncs") == 0, "rank %d: no stream/device/event synchronisation (%s)"
                % (r, stats.get("syncs")))
        T.check(stats.get("capture_intrusions") == 0,
                "rank %d: no event recorded into a capturing stream" % r)
        T.check(stats.get("unsafe_in_capture") == 0,
                "rank %d: no unsafe call during the global capture" % r)


def calls_by_launch(events):
    """NCCL launch id -> (launching event, number of calls), from the host-side events."""
    by = {}
    for e in events:
        if e["op"] == OPS["ncclGroupEnd"]:
            by[e["request"]] = (e, e["bytes_recv"])
        elif e["op"] in (OPS["ncclAllReduce"],) and not e["flags"] & EV_GROUPED:
            by[e["request"]] = (e, 1)
    return by


def case_cupti(env, corrupt=False):
    rundir, outs, truth, traces = run(env)
    no_harm(truth)
    for r, (hdr, events, comms) in traces.items():
        work = truth[r][0]
        T.check(hdr["gpu_timing"] == GPU_CUPTI, "rank %d: timing source CUPTI (%d)"
                % (r, hdr["gpu_timing"]))
        gpu = [e for e in events if e["op"] >= OPS["gpu_kernel"]]
        # The program's kernels, copies and sets, every one (pre_nccl ran before the first NCCL
        # call), on the right device and stream.
        for kind, op in (("kernel", "gpu_kernel"), ("memcpy", "gpu_memcpy"),
                         ("memset", "gpu_memset")):
            want = [w for w in work if w["kind"] == kind and "ncclDevKernel" not in w["name"]]
            recs = [e for e in gpu if e["op"] == OPS[op]]
            got = match(want, recs, "rank %d %s" % (r, kind))
            for i, e in got.items():
                T.check(e["seq"] == want[i]["stream"] and e["aux"] == want[i]["dev"] == r and
                        e["bytes"] == want[i]["bytes"],
                        "rank %d %s %s: stream %d dev %d bytes %d recorded as %d/%d/%d"
                        % (r, kind, want[i]["name"], want[i]["stream"], want[i]["dev"],
                           want[i]["bytes"], e["seq"], e["aux"], e["bytes"]))
                # The launching runtime call's host time (CUPTI's API record of the same
                # correlation id), which places the work in a step phase.
                T.check(abs(e["bytes_recv"] - want[i]["launch"]) <= START_TOL,
                        "rank %d %s %s: launched at %d, recorded %d" % (
                            r, kind, want[i]["name"], want[i]["launch"], e["bytes_recv"]))
        T.check(any(w["name"] == "pre_nccl" for w in work),
                "the kernel before the first NCCL call ran")
        # NCCL kernels: each tied to its launch (call or group) through the correlation ids.
        want = [w for w in work if "ncclDevKernel" in w["name"]]
        recs = [e for e in gpu if e["op"] == OPS["gpu_nccl"]]
        got = match(want, recs, "rank %d nccl" % r)
        launches = calls_by_launch(events)
        mapped = collections.Counter()
        for i, e in got.items():
            w = want[i]
            if w["graph"]:
                T.check(e["flags"] & EV_GRAPH and e["request"] == 0,
                        "rank %d: kernel of a graph launch marked GRAPH, not tied to a call "
                        "(flags %d launch %d)" % (r, e["flags"], e["request"]))
                mapped["graph"] += 1
                continue
            call = launches.get(e["request"])
            if not T.check(call is not None, "rank %d: NCCL kernel %s tied to a launch (%d)"
                           % (r, w["name"], e["request"])):
                continue
            ev, ncalls = call
            T.check(e["comm"] == ev["comm"] and e["seq"] == ev["seq"] and
                    e["bytes_recv"] == ncalls and e["comm"] != 0,
                    "rank %d: kernel %s carries its call's communicator, sequence and calls "
                    "(%x/%d/%d vs %x/%d/%d)" % (r, w["name"], e["comm"], e["seq"],
                                                e["bytes_recv"], ev["comm"], ev["seq"], ncalls))
            kind = "group" if ev["op"] == OPS["ncclGroupEnd"] else "allreduce"
            T.check(("ncclDevKernel_SendRecv" if kind == "group" else "ncclDevKernel_AllReduce")
                    in w["name"],
                    "rank %d: %s tied to a %s launch" % (r, w["name"], kind))
            mapped[kind] += 1
        T.check(mapped == {"allreduce": ITERS + 2, "group": ITERS, "graph": 2},
                "rank %d: NCCL kernels mapped: %s" % (r, dict(mapped)))
        captured = [e for e in events if e["op"] == OPS["ncclAllReduce"] and e["flags"] & EV_GRAPH]
        T.check(len(captured) == 1, "rank %d: the captured all-reduce is marked GRAPH (%d)"
                % (r, len(captured)))
        T.check("CUDA graphs" in hdr["gpu_note"], "rank %d: note says graphs: %r"
                % (r, hdr["gpu_note"]))
        if corrupt:
            T.check("impossible times" in hdr["gpu_note"] and "not enabled" in hdr["gpu_note"],
                    "rank %d: note names the bad records: %r" % (r, hdr["gpu_note"]))
            nk = sum(1 for w in work if w["kind"] == "kernel")
            T.check(hdr["gpu_dropped"] == 2 * nk, "rank %d: %d impossible records counted (%d)"
                    % (r, 2 * nk, hdr["gpu_dropped"]))
        else:
            T.check(hdr["gpu_dropped"] == 0, "rank %d: nothing dropped" % r)


def case_events():
    rundir, outs, truth, traces = run({"FAKE_CUPTI_REFUSE": "1"})
    no_harm(truth)
    for r, (hdr, events, comms) in traces.items():
        work, stats = truth[r]
        T.check(hdr["gpu_timing"] == GPU_EVENTS, "rank %d: timing source CUDA events (%d)"
                % (r, hdr["gpu_timing"]))
        T.check("MULTIPLE_SUBSCRIBERS" in hdr["gpu_note"] and "CUDA events" in hdr["gpu_note"],
                "rank %d: note says why and what instead: %r" % (r, hdr["gpu_note"]))
        T.check(stats.get("relaxed_queries_in_capture", 0) > 0,
                "rank %d: events were polled during the capture, in relaxed mode" % r)
        gpu = [e for e in events if e["op"] >= OPS["gpu_kernel"]]
        T.check(all(e["op"] == OPS["gpu_nccl"] and e["flags"] & EV_GPU_EVENTS for e in gpu),
                "rank %d: only NCCL launches, flagged GPU_EVENTS" % r)
        # Every launch outside the graph is timed (the last one after the program ended), with
        # its kernel's start and end.
        want = [w for w in work if "ncclDevKernel" in w["name"] and not w["graph"]]
        got = match(want, gpu, "rank %d events" % r, exact_duration=False)
        launches = calls_by_launch(events)
        for i, e in got.items():
            call = launches.get(e["request"])
            if not T.check(call is not None, "rank %d: timed launch %d is a call or group"
                           % (r, e["request"])):
                continue
            T.check(e["comm"] == call[0]["comm"] and e["seq"] == call[0]["seq"] and
                    e["bytes_recv"] == call[1], "rank %d: launch %d's communicator, "
                    "sequence, calls" % (r, e["request"]))
            # The end event is recorded when the host call returned, so it completes when the
            # kernel ended or, if the host call (the CPU NCCL's data exchange) returned later,
            # then: end = max(kernel end, host return), up to the host mapping's error.
            lo = want[i]["end"]
            hi = max(want[i]["end"], call[0]["t_end"]) + START_TOL
            T.check(lo - 2000 <= e["t_end"] <= hi,
                    "rank %d: launch %d ends at %d, kernel ended %d, host call returned %d"
                    % (r, e["request"], e["t_end"], lo, call[0]["t_end"]))
        T.check(len(want) == 2 * ITERS + 2, "rank %d: %d NCCL launches outside the graph"
                % (r, len(want)))
        captured = [e for e in events if e["op"] == OPS["ncclAllReduce"] and e["flags"] & EV_GRAPH]
        T.check(len(captured) == 1 and not any(g["request"] == captured[0]["request"]
                                               for g in gpu),
                "rank %d: the captured all-reduce is marked GRAPH and not timed" % r)
        T.check(hdr["gpu_dropped"] == 0, "rank %d: every launch timed (%d lost)"
                % (r, hdr["gpu_dropped"]))
    # The report says which timing source was used.
    rows, rep, text = T.analyze(rundir, want_rc=1)
    probs = " ".join(rep.get("problems", []))
    T.check("CUDA events" in probs and "MULTIPLE_SUBSCRIBERS" in probs,
            "report says the GPU times come from CUDA events: %r" % probs[:500])


def case_fuzz():
    """Traces of this NCCL job on the fake GPU (CUPTI kernel records, NCCL launches and their
    kernels, CUDA-event timing, GPU-side clocks) as seeds of the structure-aware fuzzer
    (tests/unit/test_fuzz.c): the analysis of damaged copies must never crash, hang, print a
    non-finite number or write invalid JSON."""
    seeds = []
    for env in ({}, {"FAKE_CUPTI_NO_TS_CALLBACK": "1"}, {"FAKE_CUPTI_REFUSE": "1"}):
        rundir = run(env)[0]
        if T.check(os.path.isdir(rundir), "run %r traced" % env):
            seeds.append(rundir)
    n = os.environ.get("CS_FUZZ_ITERATIONS", "300")
    p = subprocess.run([os.path.join(T.BIN, "test_fuzz"), "-n", n] + seeds,
                       capture_output=True, text=True, timeout=1500)
    print(p.stdout[-3000:])
    if T.check(p.returncode == 0, "fuzzing fake-GPU runs: exit %d\n%s\n%s"
               % (p.returncode, p.stdout[-6000:], p.stderr[-2000:])):
        for d in seeds:
            shutil.rmtree(os.path.dirname(d), ignore_errors=True)


def case_resources():
    """The NVML test double's GPUs on the fake CUDA runtime's PCI bus ids (0x18 + device): each
    GPU's samples go to the rank whose NCCL communicator names its bus id, and the least busy
    GPU (20 %) is named in the verdict with that rank."""
    nvml = os.environ.get("CS_NVML", "")
    util = {0x18: 20, 0x19: 70}
    gpus = ",".join("%d:512:16000:90000:1400:%x" % (util[b], b) for b in sorted(util))
    rundir, outs, truth, traces = run({"LD_LIBRARY_PATH": nvml, "FAKE_NVML_GPUS": gpus,
                                       "COMMSCOPE_SAMPLE_HZ": "50"})
    # (The job captures NCCL calls into CUDA graphs, which the analysis lists as a problem.)
    _, rep, _ = T.analyze(rundir, want_rc=1)
    res = rep.get("resources") or {}
    aff = {a["rank"]: a for a in (T.find_key(rep, "gpu_nic_affinity") or {}).get("ranks", [])}
    T.check(sorted(aff) == list(range(NP)), "every rank names its GPU: %r" % aff)
    T.check(len(res.get("gpus", [])) == 2, "two GPUs sampled once: %r" % res.get("gpus"))
    for g in res.get("gpus", []):
        bus = int(g["pci"].split(":")[0], 16) if g["pci"] else -1
        want = [r for r, a in aff.items() if int(a["bus_id"].split(":")[1], 16) == bus]
        T.check(want and g["rank"] == want[0], "GPU at bus %x: rank %r, the traces say %r"
                % (bus, g["rank"], want))
        T.check(g["util_mean"] == util.get(bus), "GPU at bus %x: %r %%" % (bus, g["util_mean"]))
        mine = [x for x in res["ranks"] if x["rank"] == g["rank"]]
        T.check(mine and res["gpus"][mine[0]["gpu"]] == g, "rank %r points at its GPU" % g["rank"])
    low = [g for g in res.get("gpus", []) if g["util_mean"] == 20]
    v = [s for s in rep.get("verdict", []) if s.startswith("GPU ")]
    T.check(low and v and v[0].startswith("GPU %d on %s (rank %d) is 20 %% busy"
                                          % (low[0]["index"], low[0]["host"], low[0]["rank"])),
            "the verdict names the least busy GPU and its rank: %r" % v)


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    cases = {"fuzz": case_fuzz,
             "cupti": lambda: case_cupti({}),
             "cupti_offset": lambda: case_cupti({"FAKE_CUPTI_NO_TS_CALLBACK": "1"}),
             "cupti_corrupt": lambda: case_cupti({"FAKE_CUPTI_CORRUPT": "1"}, corrupt=True),
             "events": case_events, "resources": case_resources}
    if case not in cases:
        print("usage: test_gpu.py %s" % "|".join(cases), file=sys.stderr)
        return 2
    cases[case]()
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
