#!/usr/bin/env python3
"""Tests of the reports people look at: the HTML report rendered in headless Chromium, and the
Perfetto export validated structurally and against the JSON report of the same run.

Usage: test_reports.py CASE; CS_BIN names the build's bin/ folder.  Cases:
  perfetto_synthetic   synthetic run (test_golden --write-run): structure, counts, filters, warning
  html_synthetic       synthetic runs, clean and broken, in Chromium
  perfetto_gpu         synthetic run with GPU records (gpu_run): GPU tracks, slices, launch arrows
  perfetto_example     cs_train under `commscope run` (blocking and --overlap), 4 ranks
  html_example         cs_train's report.html from `commscope run` in Chromium, plus a screenshot
  html_train2d         cs_train2d (TP x DP): steps, gradient sync, groups, the step timeline
  ranks_bounded        16,384 synthetic ranks: the JSON lists the ranks at the extremes (the
                       rule checked against ranks.csv), both reports within their bounds
  traces_index         a synthetic run read through RUN_DIR/traces.index (traces elsewhere)
  comms_bounded        1,500 synthetic communicators: the tables list the busiest and fold the
                       others (the rule and the totals checked against ops.csv)
Exit 0 pass, 1 fail, 77 skip (no Chromium / no mpirun).
"""
import html as htmlmod
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfetto_check  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
COMMSCOPE = os.path.join(BIN, "commscope")
MPIRUN = ["mpirun", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(cmd, env=None, timeout=150):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)


def must(cmd, env=None):
    p = run(cmd, env)
    if p.returncode != 0:
        print("command:", " ".join(cmd), "\nstdout:", p.stdout[-3000:], "\nstderr:",
              p.stderr[-3000:], file=sys.stderr)
        raise SystemExit("exit status %d" % p.returncode)
    return p


def synthetic(tmp, kind="four"):
    d = os.path.join(tmp, kind)
    must([os.path.join(BIN, "test_golden"), "--write-run", d, kind])
    return d


def op_calls(rep):
    out = {}
    for o in rep["ops"]:
        out[o["op"]] = out.get(o["op"], 0) + o["calls"]
    return out


def check_perfetto_against(path, rep, nonblocking_ops=()):
    errs, st = perfetto_check.validate(path)
    for e in errs[:20]:
        check(False, "%s: %s" % (path, e))
    check(st["pids"] == set(r["rank"] for r in rep["ranks"]),
          "one process per rank: %s vs %s" % (sorted(st["pids"]), [r["rank"] for r in rep["ranks"]]))
    # Every communication call is one slice: the counts equal the report's per-op calls.
    for op, calls in op_calls(rep).items():
        check(st["slices_by_name"].get(op, 0) == calls,
              "%s slices %d, report calls %d" % (op, st["slices_by_name"].get(op, 0), calls))
    # One finished flow per complete instance (all communicators here have >= 2 members).
    check(st["flows_finished"] == rep["instances"]["matched"],
          "finished flows %d, matched instances %d" % (st["flows_finished"],
                                                        rep["instances"]["matched"]))
    nb = sum(c for op, c in op_calls(rep).items() if op in nonblocking_ops)
    check(st["async"] == nb, "async slices %d, non-blocking calls %d" % (st["async"], nb))
    check(st["counters"] > 0, "bandwidth counters written")
    return st


def case_perfetto_synthetic(tmp):
    d = synthetic(tmp)
    out = os.path.join(tmp, "t.json")
    js = os.path.join(tmp, "r.json")
    p = must([COMMSCOPE, "analyze", d, "-q", "--json", js, "--perfetto", out],
             env={"COMMSCOPE_TEST_PERFETTO_WARN_MB": "0.000001"})
    rep = json.load(open(js))
    check_perfetto_against(out, rep, ("MPI_Iallreduce", "MPI_Isend", "MPI_Irecv"))
    # The size warning, and its estimate within a factor of two of the real size.
    m = re.search(r"warning: the Perfetto trace .* will be about ([0-9.]+) MB", p.stderr)
    if check(m, "size warning printed: %r" % p.stderr):
        est, real = float(m.group(1)), os.path.getsize(out) / 1048576.0
        check(0.5 * real <= est <= 2 * real or abs(est - real) < 0.05,
              "estimate %.3f MB vs %.3f MB written" % (est, real))
    p = must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out])
    check("warning" not in p.stderr, "no warning under the threshold: %r" % p.stderr)

    # Rank filter: only ranks 1 and 3; their instances still joined by flows.
    must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out, "--perfetto-ranks", "1,3"])
    errs, st = perfetto_check.validate(out)
    check(not errs, "filtered trace valid: %s" % errs[:3])
    check(st["pids"] == {1, 3}, "ranks 1,3 only: %s" % st["pids"])
    check(st["flows_finished"] == rep["instances"]["matched"],
          "every instance has members 1 and 3: %d flows" % st["flows_finished"])

    # Window: from 0.5 ms after the run's start (the end of MPI_Init in these traces), no slice
    # that ended before it, and fewer slices than in the whole run.
    must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out])
    start = min(e["ts"] + e["dur"] for e in json.load(open(out))["traceEvents"]
                if e["ph"] == "X" and e["name"] == "MPI_Init")
    must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out, "--perfetto-window", "0.0005:"])
    errs, st = perfetto_check.validate(out)
    check(not errs, "windowed trace valid: %s" % errs[:3])
    xs = [e for e in json.load(open(out))["traceEvents"] if e["ph"] == "X"]
    check(0 < len(xs) < sum(op_calls(rep).values()), "window keeps some slices: %d" % len(xs))
    late = [e for e in xs if e["ts"] + e["dur"] < start + 500]
    check(not late, "slices ending before the window: %s" % late[:2])

    # Collectives on one track per communicator, named after it; other calls on thread tracks.
    must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out])
    full = json.load(open(out))["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in full if e.get("name") == "thread_name"}
    for e in full:
        if e["ph"] == "X" and e.get("cat") == "collective":
            check(names.get((e["pid"], e["tid"]), "").startswith("collectives on %s" %
                                                                   e["args"]["comm"]),
                  "collective on its communicator's track: %s" % e)
        elif e["ph"] == "X" and e.get("cat") in ("p2p", "completion"):
            check(names.get((e["pid"], e["tid"]), "").startswith("thread "),
                  "point-to-point on a thread track: %s" % e)
    # One step slice per rank and step of the report.
    steps = [e for e in full if e["ph"] == "X" and e.get("cat") == "step"]
    check(len(steps) == rep["steps"]["count"] * len(rep["ranks"]),
          "%d step slices for %d steps x %d ranks" % (len(steps), rep["steps"]["count"],
                                                     len(rep["ranks"])))

    # Steps 2..3: exactly the calls that lie in those steps' slices of the whole export.
    must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out, "--perfetto-steps", "2:3"])
    errs, st = perfetto_check.validate(out)
    check(not errs, "step-limited trace valid: %s" % errs[:3])
    part = json.load(open(out))["traceEvents"]
    span = {}
    for e in steps:
        if e["args"]["step"] in (2, 3):
            lo, hi = span.get(e["pid"], (e["ts"], e["ts"] + e["dur"]))
            span[e["pid"]] = (min(lo, e["ts"]), max(hi, e["ts"] + e["dur"]))

    def calls(evs, keep):
        return sorted((e["pid"], e["name"], e["ts"]) for e in evs if e["ph"] == "X" and
                      e.get("cat") != "step" and keep(e))
    want = calls(full, lambda e: e["pid"] in span and span[e["pid"]][0] <= e["ts"] <
                 span[e["pid"]][1])
    got = calls(part, lambda e: True)
    check(want and got == want, "steps 2:3 keep the calls inside them: %d vs %d" % (len(got),
                                                                                  len(want)))
    check(sorted(e["name"] for e in part if e.get("cat") == "step") ==
          ["step 2"] * len(rep["ranks"]) + ["step 3"] * len(rep["ranks"]), "step slices 2 and 3")
    p = run([COMMSCOPE, "analyze", d, "-q", "--perfetto", out, "--perfetto-steps", "1000:"])
    check(p.returncode == 1 and "has steps 0 to" in p.stderr,
          "a step range past the end says so: %d %r" % (p.returncode, p.stderr))

    # Usage errors.
    for bad in (["--perfetto-window", "5:1"], ["--perfetto-ranks", "x"],
                ["--perfetto-window", "1:2"], ["--perfetto-steps", "3:1"],
                ["--perfetto-steps", "x:2"], ["--perfetto-steps", "-1:2"]):
        args = [COMMSCOPE, "analyze", d, "-q"] + (["--perfetto", out] if bad[0] != "--perfetto-window"
                                                  or bad[1] != "1:2" else []) + bad
        p = run(args)
        check(p.returncode == 2 and p.stderr.strip(), "%s: exit %d %r" % (bad, p.returncode,
                                                                           p.stderr))


def case_perfetto_gpu(tmp):
    """One slice per GPU record on the track of its (rank, device, stream) -- NCCL kernels on the
    track of their device and communicator --, with kind and communicator/sequence in args; an
    arrow from the host NCCL call to each kernel of its launch; the structure validated."""
    d = os.path.join(tmp, "gpu")
    p = must([os.path.join(BIN, "gpu_run"), d])
    gpu, host = [], []
    for line in p.stdout.splitlines():
        f = line.split()
        if f[0] == "gpu":
            gpu.append(dict(rank=int(f[1]), op=f[2], dev=int(f[3]), stream=int(f[4]),
                            comm=int(f[5]), seq=int(f[6]), launch=int(f[7]), tb=int(f[8]),
                            te=int(f[9])))
        elif f[0] == "host":
            host.append(dict(rank=int(f[1]), launch=int(f[5]), tb=int(f[6]), te=int(f[7])))
    check(len(gpu) == 12 and len(host) == 4, "gpu_run wrote %d GPU, %d host records"
          % (len(gpu), len(host)))
    out = os.path.join(tmp, "gpu.json")
    # The kernel of launch 0 is reported as not tied to its call: a problem, exit status 1.
    p = run([COMMSCOPE, "analyze", d, "-q", "--perfetto", out])
    check(p.returncode == 1 and "could not be tied" in p.stderr, "analyze: %d %s"
          % (p.returncode, p.stderr))
    errs, st = perfetto_check.validate(out)
    check(not errs, "GPU trace validates: %s" % errs[:5])
    with open(out) as fh:
        evs = json.load(fh)["traceEvents"]
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e["ph"] == "M" and e.get("name") == "thread_name"}
    slices = [e for e in evs if e["ph"] == "X" and e.get("cat") == "gpu"]
    check(len(slices) == len(gpu), "%d GPU slices for %d GPU records" % (len(slices), len(gpu)))
    # Times: the slices of rank 0's first host call give the offset of the aligned clock.
    t0 = min(e["ts"] for e in evs if e["ph"] == "X" and e["pid"] == 0 and e["name"] ==
             "ncclAllReduce") * 1000 - min(h["tb"] for h in host if h["rank"] == 0)
    kinds = {"gpu_kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset",
             "gpu_nccl": "NCCL kernel"}
    by_slice = {}
    for g in gpu:
        want_ts = (g["tb"] + t0) / 1000.0
        hit = [e for e in slices if e["pid"] == g["rank"] and e["name"] == g["op"]
               and abs(e["ts"] - want_ts) < 5e-4 and e["args"].get("device") == g["dev"]]
        if not check(len(hit) == 1, "one slice for GPU record %r: %d" % (g, len(hit))):
            continue
        e = hit[0]
        by_slice[id(e)] = g
        check(abs(e["dur"] - (g["te"] - g["tb"]) / 1000.0) < 5e-4, "duration of %r" % g)
        check(e["args"].get("kind") == kinds[g["op"]], "kind of %r: %r" % (g, e["args"]))
        name = tname.get((e["pid"], e["tid"]), "")
        if g["op"] == "gpu_nccl":
            where = "world" if g["comm"] else "an unknown communicator"
            check(name == "GPU %d NCCL kernels on %s" % (g["dev"], where),
                  "track of %r: %r" % (g, name))
            if g["comm"]:
                check(e["args"].get("comm") == "world" and e["args"].get("seq") == g["seq"],
                      "comm/seq of %r: %r" % (g, e["args"]))
            check(e["args"].get("launch") == g["launch"], "launch of %r" % g)
        else:
            check(name == "GPU %d stream %d" % (g["dev"], g["stream"]),
                  "track of %r: %r" % (g, name))
            check(e["args"].get("stream") == g["stream"], "stream arg of %r" % g)
    # Distinct (rank, device, stream) get distinct tracks, the same ones the same track.
    key = {}
    for e in slices:
        g = by_slice.get(id(e))
        if g:
            k = (g["rank"], g["dev"], g["stream"] if g["op"] != "gpu_nccl" else ("nccl", g["comm"]))
            key.setdefault(k, set()).add((e["pid"], e["tid"]))
    check(all(len(v) == 1 for v in key.values()), "one track per key: %r" % key)
    check(len({next(iter(v)) for v in key.values()}) == len(key), "no two keys share a track")
    # Arrows: one per NCCL kernel whose launch has a host call on its rank, s on the host call's
    # slice, f on the kernel's.
    launches = {(h["rank"], h["launch"]): h for h in host}
    want = sorted((g["rank"], g["tb"]) for g in gpu
                  if g["op"] == "gpu_nccl" and (g["rank"], g["launch"]) in launches)
    pts = {}
    for e in evs:
        if e["ph"] in ("s", "f") and e.get("name") == "launch":
            pts.setdefault(e["id"], {})[e["ph"]] = e
    got = []
    for fid, pp in pts.items():
        if not check("s" in pp and "f" in pp, "launch flow %r has s and f" % fid):
            continue
        s, f = pp["s"], pp["f"]
        k = [g for g in gpu if g["rank"] == f["pid"] and g["op"] == "gpu_nccl"
             and (g["tb"] + t0) / 1000.0 <= f["ts"] <= (g["te"] + t0) / 1000.0
             and tname.get((f["pid"], f["tid"]), "").startswith("GPU %d " % g["dev"])]
        if not check(len(k) == 1, "flow %r ends on one NCCL kernel: %r" % (fid, k)):
            continue
        h = launches.get((k[0]["rank"], k[0]["launch"]))
        check(h and s["pid"] == f["pid"] and
              (h["tb"] + t0) / 1000.0 <= s["ts"] <= (h["te"] + t0) / 1000.0,
              "flow %r starts on the host call of launch %d" % (fid, k[0]["launch"]))
        got.append((k[0]["rank"], k[0]["tb"]))
    check(sorted(got) == want, "launch arrows %r, expected %r" % (sorted(got), want))
    # A window keeps only the GPU records inside it (and stays valid).
    run([COMMSCOPE, "analyze", d, "-q", "--perfetto", out, "--perfetto-window", "0.00055:"])
    errs, st = perfetto_check.validate(out)
    check(not errs, "windowed GPU trace validates: %s" % errs[:5])
    with open(out) as fh:
        n = sum(1 for e in json.load(fh)["traceEvents"] if e["ph"] == "X" and e.get("cat") == "gpu")
    first = min(min(h["tb"] for h in host), min(g["tb"] for g in gpu))
    keep = sum(1 for g in gpu if g["te"] - first >= 550000)
    check(n == keep, "window 0.55 ms: %d GPU slices, expected %d" % (n, keep))
    return 0


def chromium():
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_cmd(exe):
    return [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--enable-logging=stderr", "--v=0"]


def page_problems(exe, path):
    """(console lines, DOM) of the page after its scripts ran."""
    p = run(chromium_cmd(exe) + ["--dump-dom", "file://" + os.path.abspath(path)], timeout=90)
    console = [ln for ln in p.stderr.splitlines() if ":CONSOLE" in ln]
    return p.returncode, console, p.stdout


def check_html(exe, path, rep, shot=None):
    with open(path) as f:
        src = f.read()
    # Self-contained: no external scripts, styles, fonts or images.
    ext = re.findall(r'(?:src|href)\s*=\s*"(?!#)[^"]*"|url\(|@import|<link\b', src)
    check(not ext, "%s: external references %s" % (path, ext[:5]))
    rc, console, dom = page_problems(exe, path)
    check(rc == 0, "chromium exit %d" % rc)
    check(not console, "%s: console messages %s" % (path, console[:5]))
    check('data-ready="1"' in dom, "%s: the page's script ran to its end" % path)
    text = htmlmod.unescape(dom)
    # Decimal numbers shown in the page, by number of decimals.  The JSON has 9 significant
    # digits, so a value matches a shown number when they agree to the shown precision.
    shown = {}
    for m in re.finditer(r"(?<![\d.])(-?\d+)\.(\d+)(?![\d.])", text):
        shown.setdefault(len(m.group(2)), []).append(float(m.group(0)))

    def has(v, decimals, what):
        tol = 0.5 * 10 ** -decimals + 1e-12
        check(any(abs(x - v) <= tol for x in shown.get(decimals, [])),
              "%s: %s = %r from report.json is not in the page" % (path, what, v))

    want = []
    # Each rank's row of the per-rank table (beyond 512 ranks: the 256 that computed most and the
    # 256 that computed least, every other rank's compute between them), and each op's row of
    # the operations table.
    ranks = rep["ranks"]
    if len(ranks) > 512:
        rows = set(int(x) for x in re.findall(r"<tr><td>(\d+)</td><td>[^<]*</td><td>[-\d.]+</td>"
                                             r"<td>[-\d.]+</td><td>[-\d.]+</td><td>[-\d.]+</td>"
                                             r"<td>(?:[-\d.]+|&ndash;|\u2013)</td>"
                                             r"<td>(?:[-\d.]+|&ndash;|\u2013)</td><td>\d+</td>"
                                             r"<td>\d+</td><td>(?:yes|no)</td></tr>", dom))
        comp = {r["rank"]: r["compute_s"] for r in ranks}
        low = sorted(comp[k] for k in rows)[:256]
        high = sorted(comp[k] for k in rows)[-256:]
        check(len(rows) == 512 and "report.json has every rank" in dom,
              "%s: 512 of %d ranks listed, and said so (%d)" % (path, len(ranks), len(rows)))
        check(all(low[-1] - 1e-8 <= comp[k] <= high[0] + 1e-8 for k in comp if k not in rows),
              "%s: the ranks left out computed between the listed extremes" % path)
        ranks = [r for r in ranks if r["rank"] in rows]
    for r in ranks:
        m = re.search(r"<tr><td>%d</td><td>%s</td><td>([-\d.]+)</td><td>([-\d.]+)</td>"
                      r"<td>([-\d.]+)</td><td>([-\d.]+)</td><td>([-\d.]+|&ndash;|\u2013)</td>"
                      r"<td>([-\d.]+|&ndash;|\u2013)</td><td>(\d+)</td><td>(\d+)</td>"
                      % (r["rank"], re.escape(r["host"])), dom)
        if not check(m, "%s: no table row for rank %d" % (path, r["rank"])):
            continue
        for i, k in enumerate(("wall_s", "compute_s", "comm_s", "wait_s")):
            check(abs(float(m.group(i + 1)) - r[k]) <= 5e-7 + 1e-12,
                  "%s: rank %d %s shown %s, report.json %r" % (path, r["rank"], k, m.group(i + 1),
                                                               r[k]))
        p2p, dash = r.get("p2p_wait_s"), m.group(5) in ("&ndash;", "\u2013")  # not measured
        check(dash if p2p is None else not dash and abs(float(m.group(5)) - p2p) <= 5e-7 + 1e-12,
              "%s: rank %d p2p_wait_s shown %s, report.json %r" % (path, r["rank"], m.group(5),
                                                                  p2p))
        caused, dash = r.get("p2p_caused_s"), m.group(6) in ("&ndash;", "\u2013")
        check(dash if caused is None else
              not dash and abs(float(m.group(6)) - caused) <= 5e-7 + 1e-12,
              "%s: rank %d p2p_caused_s shown %s, report.json %r" % (path, r["rank"], m.group(6),
                                                                    caused))
        check(int(m.group(7)) == r["calls"] and int(m.group(8)) == r["bytes"],
              "%s: rank %d calls/bytes %s/%s vs %d/%d" % (path, r["rank"], m.group(7), m.group(8),
                                                         r["calls"], r["bytes"]))
    names = {c["comm"]: c["name"] for c in rep.get("communicators", [])}
    for o in rep["ops"]:
        # (the label, then the communicator's name when it says more: report.json's)
        name = names.get(o["comm"], o["comm"])
        tail = ("" if name == o["comm"] else
                "<br><small>%s</small>" % htmlmod.escape(name, quote=False))
        m = re.search(r"<tr><td>%s</td><td>%s%s</td><td>-?\d+</td><td>(\d+)</td><td>(\d+)</td>"
                      r"<td>([\d.]+)</td>" % (re.escape(o["op"]), re.escape(o["comm"]),
                                              re.escape(tail)), dom)
        if check(m, "%s: no table row for %s on %s" % (path, o["op"], o["comm"])):
            check((int(m.group(1)), int(m.group(2))) == (o["calls"], o["bytes"]) and
                  abs(float(m.group(3)) - o["time_s"]) <= 5e-7 + 1e-12,
                  "%s: %s row %s vs report.json %r" % (path, o["op"], m.groups(), o))
    # The hosts-and-topology section: each host's row, each op's path and capacity row.
    topo = rep.get("topology")
    if check(topo is not None, "%s: report.json has its topology" % path):
        for hst in topo["hosts"]:
            want.append("<tr><td>%s</td><td>%d</td><td>%s</td><td>%s</td>"
                        % (hst["host"], hst["ranks"], hst["source"] if hst["snapshot"] else "none",
                           hst["nic"] or "-"))
        for o in topo["ops"]:
            cap = o["capacity_gbps"]
            want.append("<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td>"
                        % (o["op"], o["comm"], o["scope"], o["path"],
                           "\u2013" if cap is None else "%.1f" % cap))
    want.append("%d matched" % rep["instances"]["matched"])
    if rep["pop"]["load_balance"] is not None:
        has(rep["pop"]["load_balance"], 4, "load_balance")
    if rep["stragglers"]:
        s = rep["stragglers"][0]
        # The stragglers table's first row (the verdict names the rank only when it matters).
        want.append("<tr><td>%d</td><td>%s</td><td>%d</td>" % (s["rank"], s["host"],
                                                            s["late_arrivals"]))
        has(s["others_waited_s"], 6, "others_waited_s")
    want.append("%d expected, %d found" % (rep["trace"]["ranks_expected"],
                                           rep["trace"]["ranks_found"]))
    for w in want:
        check(w in text or w in dom, "%s: %r from report.json is not in the page" % (path, w))
    # The page leads with the verdict.
    check(text.find('id="verdict"') < text.find('id="breakdown"'), "verdict first")
    if shot:
        p = run(chromium_cmd(exe) + ["--screenshot=" + shot, "--window-size=1100,2200",
                                     "file://" + os.path.abspath(path)], timeout=90)
        check(p.returncode == 0 and os.path.exists(shot), "screenshot written")
        with open(shot, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "screenshot is a PNG")
    return text


def rendered(path, rep, label="Chromium"):
    """With Chromium installed, check_html on the page at `path` against the JSON report `rep`
    and hand back its failures as "LABEL: what" (taken off this module's list, for the calling
    test to add to its own); without Chromium, []."""
    exe = chromium()
    if not exe:
        return []
    check_html(exe, path, rep)
    got = ["%s: %s" % (label, f) for f in failures]
    del failures[:]
    return got


def verdict(failures):
    """A test's exit status from its failures: 1 (after counting them on stderr) or 0 ("ok")."""
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


def case_html_synthetic(tmp):
    exe = chromium()
    if not exe:
        print("SKIP: chromium not installed (Debian package chromium)")
        return 77
    # The detector itself: a page with a script error must be caught.
    bad = os.path.join(tmp, "bad.html")
    with open(bad, "w") as f:
        f.write("<!DOCTYPE html><html><body><script>no_such_function();</script></body></html>")
    rc, console, _ = page_problems(exe, bad)
    check(console, "a script error in a page is detected")

    d = synthetic(tmp, "four")
    h, js = os.path.join(tmp, "four.html"), os.path.join(tmp, "four.json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js, "--html", h])
    rep = json.load(open(js))
    text = check_html(exe, h, rep)
    check("Bytes sent from the row" in text, "point-to-point matrix drawn")
    # The what-if section shows the replay's step times (6 decimals) and its note, if any.
    wi = rep["whatif"]
    if wi["note"]:
        check(htmlmod.escape(wi["note"], quote=False) in text, "what-if note shown: %r" % wi["note"])
    for k in ("measured_step_s", "no_straggler_step_s", "full_overlap_step_s"):
        if check(wi[k] is not None, "what-if %s computed" % k):
            check("<td>%.6f</td>" % wi[k] in text, "what-if %s %.6f shown" % (k, wi[k]))
    check("%d steps" % rep["steps"]["count"] in text, "step count shown")

    d = synthetic(tmp, "broken")
    h, js = os.path.join(tmp, "broken.html"), os.path.join(tmp, "broken.json")
    p = run([COMMSCOPE, "analyze", d, "-q", "--json", js, "--html", h])
    check(p.returncode == 4, "broken run (a rank died) exits 4: %d" % p.returncode)
    text = check_html(exe, h, json.load(open(js)))
    check("The trace is incomplete" in text, "verdict says the trace is incomplete")
    # No collective instance is complete, but rank 1 waits for rank 0's sends: the wait map
    # shows those waits and says what they are.
    check("No rank waited at any collective" not in text and
          "and for point-to-point partners, in that step" in text,
          "wait map of the broken run shows the waits for point-to-point partners")
    d = synthetic(tmp, "many1")
    h, js = os.path.join(tmp, "one.html"), os.path.join(tmp, "one.json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js, "--html", h])
    text = check_html(exe, h, json.load(open(js)))
    check("No rank waited at any collective" in text, "one rank: wait map says why it is empty")

    # 1024 ranks on 128 hosts: one bar and one heat-map row per node, a page of modest size.
    d = synthetic(tmp, "many1024")
    h, js = os.path.join(tmp, "many.html"), os.path.join(tmp, "many.json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js, "--html", h])
    rep = json.load(open(js))
    check(len(rep["ranks"]) == 1024, "1024 ranks analysed")
    text = check_html(exe, h, rep)
    check(text.count('class="bar"') == 128, "128 bars: %d" % text.count('class="bar"'))
    check("1024 ranks: one bar per node" in text, "bars grouped by node")
    check("Rank 5 on host000 arrives last at 8 of its 10" in text, "verdict names rank 5")
    check(os.path.getsize(h) < 2 << 20, "page size %d" % os.path.getsize(h))
    return 0


def write_wire(path, host, local, peers, buckets, end):
    """A commscope-wire/1 file (docs/wire.md) as a node's capture writes it: host `host` at
    address `local`, `peers` {address: host}, interface eth0 (expected, 10 Gb/s); `buckets`
    [(bucket, peer address, tx_bytes, tx_pkts, rx_bytes, rx_pkts, tx_retrans)], 1 ms buckets on
    a CLOCK_REALTIME 1.7e18 ns ahead of CLOCK_MONOTONIC (the traces' clock); `end` the totals."""
    addrs = [(local, host)] + sorted(peers.items())
    with open(path, "w") as f:
        f.write("commscope-wire 1\nhost %s\nsource live\nbucket_ns 1000000\nsnaplen 128\n"
                "clock realtime_ns 1700000000000000000 monotonic_ns 0\nfilter (none)\n"
                "local %s\niface 0 eth0 linktype 1\nifinfo 0 speed_mbps 10000 expected 1\n"
                % (host, local))
        for j, (a, h) in enumerate(addrs):
            f.write("addr %d %s %s\n" % (j, a, h))
        index = {a: j for j, (a, _) in enumerate(addrs)}
        for b, peer, txb, txp, rxb, rxp, rt in buckets:
            f.write("b %d 0 0 %d %d %d %d %d %d 0 0 0 0 0\n"
                    % (1700000000000 + b, index[peer], txb, txp, rxb, rxp, rt))
        f.write("ifstats 0 recv %d drop 0 seen %d\n" % (end["packets"], end["packets"]))
        f.write("end packets %(packets)d bytes %(bytes)d ip %(ip)d non_ip %(non_ip)d short "
                "%(short)d flows 2 untracked 0 retrans %(retrans)d dupacks 0 roce 0 bad_time 0\n"
                % end)


def case_html_wire(tmp):
    """The wire section of the HTML report on a synthetic run of two hosts whose captures were
    written here: every capture's totals, interface and link from report.json shown, the
    capture's warnings first, the send-rate chart drawn; without captures, what to do."""
    exe = chromium()
    if not exe:
        print("SKIP: chromium not installed (Debian package chromium)")
        return 77
    d = synthetic(tmp, "four")  # ranks 0, 1 on node0 and 2, 3 on node1
    b0 = [(k, "10.0.0.2", 150000 + 1000 * k, 100 + k, 90000, 60, 20 if k == 2 else 0)
          for k in range(5)]
    write_wire(os.path.join(d, "wire-node0.csw"), "node0", "10.0.0.1", {"10.0.0.2": "node1"}, b0,
               {"packets": 900, "bytes": 1300000, "ip": 860, "non_ip": 20, "short": 20,
                "retrans": 20})
    b1 = [(k, "10.0.0.1", 90000, 60, 150000 + 1000 * k, 100 + k, 0) for k in range(5)]
    write_wire(os.path.join(d, "wire-node1.csw"), "node1", "10.0.0.2", {"10.0.0.1": "node0"}, b1,
               {"packets": 830, "bytes": 1200000, "ip": 830, "non_ip": 0, "short": 0,
                "retrans": 0})
    h, js = os.path.join(tmp, "wire.html"), os.path.join(tmp, "wire.json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js, "--html", h])
    rep = json.load(open(js))
    w = rep.get("wire")
    if not check(w is not None, "the report has a wire section"):
        return 0
    text = check_html(exe, h, rep)
    sec = text[text.find('<section id="wire">'):]
    sec = sec[:sec.find("</section>")]
    check(sec.startswith('<section id="wire">'), "the page has the wire section")
    for c in w["captures"]:
        check(("<tr><td>%s</td><td>yes</td>" % c["host"] +
               "".join("<td>%d</td>" % c[k] for k in ("packets", "bytes", "ip_packets", "non_ip",
                                                      "short_headers", "untracked", "bad_time")))
              in sec, "capture row of %s: %r" % (c["host"], c))
    for i in w["interfaces"]:
        check("<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td>"
              % (i["host"], i["name"], i["bytes"], i["packets"]) in sec, "interface row %r" % i)
    check(len(w["peers"]) == 2, "two links: %r" % w["peers"])
    for p in w["peers"]:
        check("<tr><td>%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td>"
              % (p["host"], p["peer"], p["bytes_tx"], p["bytes_rx"], p["retransmits"]) in sec,
              "link row %r" % p)
    check(any("node0: 20 of 900 packets (2.2 %) were captured too short" in x
              for x in w["warnings"]), "the cut-short warning in the JSON: %r" % w["warnings"])
    for x in w["warnings"]:
        check('<p class="warn">%s</p>' % x in sec, "warning shown: %r" % x)
    check("%d bytes; the traced communication implies %d" % (w["wire_bytes"], w["traced_bytes"])
          in sec, "wire and traced bytes shown")
    # The lossy link is the job's business: first among the section's warnings, and in the
    # verdict of every report (text, JSON, HTML) with a link to the evidence.
    lossy = [x for x in w["warnings"] if x.startswith("node0 -> node1: 3.92% of the packets sent "
                                                        "were TCP retransmissions (20 of 510)")]
    if check(len(lossy) == 1, "the lossy link warned: %r" % w["warnings"]):
        check(sec.find('<p class="warn">') == sec.find('<p class="warn">%s' % lossy[0]),
              "the lossy link's warning comes first in the section")
        check("On the wire: " + lossy[0] in rep["verdict"], "JSON verdict: %r" % rep["verdict"])
        vsec = text[text.find('<section id="verdict">'):]
        vsec = vsec[:vsec.find("</section>")]
        check('<li>On the wire: %s <a href="#wire">evidence</a></li>' % lossy[0] in vsec,
              "HTML verdict names the lossy link")
        out = run([COMMSCOPE, "analyze", d]).stdout
        v = out[out.find("Verdict"):out.find("Per-rank time")]
        check("- On the wire: " + lossy[0] in v, "text verdict names the lossy link: %r" % v)
    check(not any(x.startswith("On the wire") and "captured too short" in x
                  for x in rep["verdict"]), "the capture's own warnings stay out of the verdict")
    check(sec.count("<polyline") == len(w["series"]) > 0, "one rate line per link")
    # More links than the chart has colours: the ten that sent the most, most first.
    d3 = synthetic(tmp, "four")
    os.rename(d3, os.path.join(tmp, "twelve"))
    d3 = os.path.join(tmp, "twelve")
    os.remove(os.path.join(d3, "wire-node1.csw"))
    peers = {"10.0.1.%d" % k: "-" for k in range(1, 13)}
    sends = {"10.0.1.%d" % k: 1000 * (1 + (k * 7) % 12) for k in range(1, 13)}
    write_wire(os.path.join(d3, "wire-node0.csw"), "node0", "10.0.0.1", peers,
               [(0, a, b, 1, 0, 0, 0) for a, b in sends.items()],
               {"packets": 12, "bytes": sum(sends.values()), "ip": 12, "non_ip": 0, "short": 0,
                "retrans": 0})
    h3, js3 = os.path.join(tmp, "twelve.html"), os.path.join(tmp, "twelve.json")
    must([COMMSCOPE, "analyze", d3, "-q", "--json", js3, "--html", h3])
    w3 = json.load(open(js3))["wire"]
    with open(h3) as f:
        page = htmlmod.unescape(f.read())
    top = sorted(w3["series"], key=lambda x: -sum(x["tx_bytes"]))[:10]
    legend = re.findall(r"<span><i style=\"background:#\w+\"></i>node0 \u2192 ([\d.]+)</span>",
                        page)
    check(len(w3["series"]) == 12 and legend == [x["peer"] for x in top],
          "legend = the 10 links that sent the most, most first: %r vs %r"
          % (legend, [x["peer"] for x in top]))
    wsec = page[page.find('<section id="wire">'):]
    wsec = wsec[:wsec.find("</section>")]
    check("the 10 of 12 links that sent the most" in wsec and wsec.count("<polyline") == 10,
          "the chart says it draws 10 of 12, and does: %d" % wsec.count("<polyline"))
    # A run of two hosts without captures says how to get one; a run on one host, why there is
    # nothing to capture.
    for kind, want in (("broken", "no wire capture was recorded with this run"),
                       ("many1", "all ranks ran on one host")):
        h2 = os.path.join(tmp, "nowire-%s.html" % kind)
        run([COMMSCOPE, "analyze", synthetic(tmp, kind), "-q", "--html", h2])
        with open(h2) as f:
            check(want in f.read(), "%s without captures: %r said" % (kind, want))
    return 0


def write_pcap(path, frames):
    """A classic pcap file (microsecond timestamps, Ethernet) of `frames`: (ts_us, captured
    bytes, wire length)."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1))
        for ts, data, length in frames:
            f.write(struct.pack("<IIII", ts // 1000000, ts % 1000000, len(data), length))
            f.write(data)


def tcp_frame(src, dst, seq):
    """Ethernet + IPv4 + TCP headers (54 bytes) of a 1514-byte segment from src to dst."""
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 1500, 0, 0, 64, 6, 0, socket.inet_aton(src),
                     socket.inet_aton(dst))
    tcp = struct.pack(">HHIIBBHHH", 40000, 1024, seq, 0, 0x50, 0x18, 0, 0, 0)
    return b"\0" * 12 + b"\x08\x00" + ip + tcp


def case_pcap_only(tmp):
    """`commscope analyze --pcap FILE` without a run: the wire section alone, as text, JSON and
    an HTML page (rendered in Chromium when installed); options that need traces refused; a file
    that is not a capture named with what is wrong."""
    frames = [(1000 * k, tcp_frame("10.1.0.1", "10.1.0.2", 1 + 1448 * k), 1514) for k in range(40)]
    frames += [(50000 + k, b"\0" * 12 + b"\x08\x06" + b"\0" * 28, 60) for k in range(3)]  # ARP
    frames += [(60000, tcp_frame("10.1.0.1", "10.1.0.2", 1)[:20], 1514)]  # cut in the IP header
    pcap = os.path.join(tmp, "two.pcap")
    write_pcap(pcap, frames)
    js, h = os.path.join(tmp, "two.json"), os.path.join(tmp, "two.html")
    p = run([COMMSCOPE, "analyze", "--pcap", pcap, "--json", js, "--html", h])
    # (what the wire shows -- the cut frame's warning -- is no problem with the input: exit 0)
    check(p.returncode == 0, "pcap only: exit %d %r" % (p.returncode, p.stderr))
    check("Capture" in p.stdout and "two.pcap" in p.stdout, "the text names the capture")
    w = json.load(open(js))["wire"]
    c = w["captures"][0] if len(w["captures"]) == 1 else {}
    check((c.get("packets"), c.get("bytes"), c.get("ip_packets"), c.get("non_ip"),
           c.get("short_headers"), c.get("complete")) == (44, 40 * 1514 + 3 * 60 + 1514, 40, 3, 1,
                                                          True),
          "the capture's totals: %r" % c)
    sent = [x for x in w["peers"] if x["host"] == "10.1.0.1" and x["peer"] == "10.1.0.2"]
    check(len(sent) == 1 and sent[0]["bytes_tx"] == 40 * 1514 and sent[0]["packets_tx"] == 40,
          "the link 10.1.0.1 -> 10.1.0.2: %r" % w["peers"])
    check(any("1 of 44 packets (2.3 %) were captured too short" in x for x in w["warnings"]),
          "the cut frame said: %r" % w["warnings"])
    with open(h) as f:
        page = htmlmod.unescape(f.read())
    check("<tr><td>%s</td><td>yes</td><td>44</td>" % pcap in page, "the page lists the capture")
    check("<polyline" in page, "the page draws the link's rate")
    exe = chromium()
    if exe:
        rc, console, dom = page_problems(exe, h)
        check(rc == 0 and not console and "<polyline" in dom,
              "the page renders without messages: %d %r" % (rc, console[:3]))
    for opt in (["--perfetto", os.path.join(tmp, "p.json")], ["--events", os.path.join(tmp, "e")]):
        p = run([COMMSCOPE, "analyze", "--pcap", pcap] + opt)
        check(p.returncode == 2 and "%s needs traces" % opt[0] in p.stderr,
              "%s without traces refused: %d %r" % (opt[0], p.returncode, p.stderr))
    bad = os.path.join(tmp, "bad.pcap")
    with open(bad, "w") as f:
        f.write("GET / HTTP/1.1\r\n")
    # Input read in part: a file cut inside a packet (its packets before the cut count), or a
    # second file that is not a capture: exit 1, the readable packets reported.
    cut = os.path.join(tmp, "cut.pcap")
    with open(pcap, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(24 + 10 * (16 + 54) + 30))
    for files, packets in (([cut], 10), ([pcap, bad], 44)):
        p = run([COMMSCOPE, "analyze", "-q", "--json", "-", "--pcap"] + files)
        caps = json.loads(p.stdout)["wire"]["captures"] if p.stdout.startswith("{") else []
        check(p.returncode == 1 and len(caps) == 1 and caps[0]["packets"] == packets,
              "%s: exit %d, captures %r, %r" % (files, p.returncode, caps, p.stderr))
    p = run([COMMSCOPE, "analyze", "--pcap", bad, "--html", os.path.join(tmp, "bad.html")])
    check(p.returncode == 3 and "not a pcap or pcapng file" in p.stderr and
          not os.path.exists(os.path.join(tmp, "bad.html")),
          "a file that is not a capture: %d %r" % (p.returncode, p.stderr))
    return 0


def train_run(tmp, name, extra):
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun")
        raise SystemExit(77)
    d = os.path.join(tmp, name)
    env = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    must([COMMSCOPE, "run", "-o", d, "--quiet", "--"] + MPIRUN +
         ["-np", "4", os.path.join(BIN, "cs_train"), "--steps", "4", "--steps-marker",
          "--slow-rank", "2"] + extra, env=env)
    return d, json.load(open(os.path.join(d, "report.json")))


def case_perfetto_example(tmp):
    for name, extra in (("blocking", []), ("overlap", ["--overlap"])):
        d, rep = train_run(tmp, name, extra)
        out = os.path.join(tmp, name + ".trace.json")
        must([COMMSCOPE, "analyze", d, "-q", "--perfetto", out])
        st = check_perfetto_against(out, rep, ("MPI_Iallreduce",))
        if extra:
            check(st["async"] > 0, "overlap run has async slices")
    return 0


def case_html_example(tmp):
    exe = chromium()
    if not exe:
        print("SKIP: chromium not installed (Debian package chromium)")
        return 77
    d, rep = train_run(tmp, "html", [])
    h = os.path.join(d, "report.html")
    check(os.path.exists(h), "commscope run wrote report.html")
    check_html(exe, h, rep, shot=os.path.join(tmp, "shot.png"))
    return 0


def case_html_train2d(tmp):
    """cs_train2d (TP x DP, slow rank 3) under `commscope run`: the step sections of report.html
    against report.json and against what the program printed about its own groups."""
    exe = chromium()
    if not exe:
        print("SKIP: chromium not installed (Debian package chromium)")
        return 77
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun")
        return 77
    d = os.path.join(tmp, "train2d")
    n = 8
    # 4 ranks on 2 cores: the waiting ranks yield the core (Open MPI polls otherwise), so that
    # the slow rank (100 times its compute) is the one the others wait for, not one the
    # scheduler happened to leave out.
    p = must([COMMSCOPE, "run", "-o", d, "--quiet", "--"] + MPIRUN +
             ["--mca", "mpi_yield_when_idle", "1", "-np", "4", os.path.join(BIN, "cs_train2d"),
              "--steps", str(n), "--steps-marker", "--slow-rank", "3", "--slow-factor", "100"])
    rep = json.load(open(os.path.join(d, "report.json")))
    h = os.path.join(d, "report.html")
    text = check_html(exe, h, rep)
    dom = open(h).read()
    s = rep["steps"]
    check(s["count"] == n, "steps found: %r of %d" % (s["count"], n))
    m = re.search(r'<b id="stepcount">(\d+) steps</b>', dom)
    check(m and int(m.group(1)) == s["count"], "step count in the page: %s" % (m and m.group(0)))
    rows = re.findall(r"<tr><td>(\d+)</td><td>(yes|no)</td><td>([\d.]+)</td>",
                      dom[dom.find('id="steplist"'):])
    check([(int(k), t == "yes") for k, t, _ in rows] ==
          [(x["index"], x["timed"]) for x in s["per_step"]], "one row per step: %r" % rows)
    for (k, _, ts), x in zip(rows, s["per_step"]):
        check(abs(float(ts) - x["time_s"]) <= 5e-7 + 1e-12, "step %s time %s vs %r" % (k, ts,
                                                                                     x["time_s"]))
    # Gradient-sync share: the number, and the verdict sentence in step terms.
    g = rep["gradient_sync"]["share"]
    m = re.search(r'<b id="gradshare">([\d.]+)</b>', dom)
    check(g is not None and m and abs(float(m.group(1)) - g) <= 5e-5 + 1e-12,
          "gradient-sync share shown %s, report.json %r" % (m and m.group(1), g))
    if g is not None:
        want = "communication calls for %.1f %% of each step" % (100 * g)
        check(want in text, "verdict states the gradient-sync share: %r" % want)
    # Group roles: the page's table agrees with report.json, and with the program's own groups.
    shown = dict(re.findall(r'<tr><td>([\w-]+)(?:<br><small>[^<]*</small>)?</td>'
                            r'<td class="role">(\w+)</td>', dom))
    check(shown == {x["comm"]: x["role"] for x in rep["groups"]},
          "group roles in the page %r vs report.json" % shown)
    truth = {}
    for m in re.finditer(r"^cs_train2d: group (\w+) ranks=(\S+)", p.stdout, re.M):
        truth[tuple(int(x) for x in m.group(2).split(","))] = m.group(1)
    check(len(truth) == 4, "the program printed its four groups: %r" % truth)
    for x in rep["groups"]:
        if tuple(x["ranks"]) in truth:
            check(x["role"] == truth[tuple(x["ranks"])], "group %r role %r, program %r" %
                  (x["ranks"], x["role"], truth[tuple(x["ranks"])]))
    # The representative step: the median timed one, every rank a row, and the mean of the
    # rows' step durations is that step's time in report.json.
    timed = sorted((x["time_s"], x["index"]) for x in s["per_step"] if x["timed"])
    k = timed[(len(timed) - 1) // 2][1]
    check(("Step %d, the median of the timed steps" % k) in text, "timeline of step %d" % k)
    durs = [float(x) for x in re.findall(r"<title>rank \d+: step ([\d.]+) s, in calls", dom)]
    check(len(durs) == len(rep["ranks"]), "one timeline row per rank: %d" % len(durs))
    if durs:
        mean = sum(durs) / len(durs)
        check(abs(mean - s["per_step"][k]["time_s"]) <= 2e-6,
              "timeline step %.6f vs report.json %.6f" % (mean, s["per_step"][k]["time_s"]))
    # The wait map is by step, and the straggler sentence is in step time.
    check("%d steps, one row per rank" % n in text, "wait heat map by step")
    st = rep["stragglers"]
    check(st and st[0]["rank"] == 3, "rank 3 is the straggler: %r" % st[:1])
    check(re.search(r"Rank 3 on \S+ arrives last at .* the other ranks wait [\d.]+ % of each "
                    r"step for it", text), "verdict in step time names rank 3")
    return 0


def case_ranks_bounded(tmp):
    """Beyond 4096 ranks the JSON's per-rank arrays list the ranks at the extremes (report.h,
    CS_REPORT_RANKS_LISTED) and --ranks-csv has every rank: the listed set is checked against
    the rule applied to the CSV's own figures, the listed figures against the CSV's, and the
    report sizes against the bounds (HTML 5 MB, JSON 20 MB)."""
    import csv
    n, extreme = 16384, 256
    d = synthetic(tmp, "many%d" % n)
    js, h, cap = (os.path.join(tmp, x) for x in ("big.json", "big.html", "capped.csv"))
    p = must([COMMSCOPE, "analyze", d, "--json", js, "--html", h, "--ranks-csv-capped", cap])
    check(os.path.getsize(js) <= 20 << 20, "JSON %d bytes <= 20 MB" % os.path.getsize(js))
    check(os.path.getsize(h) <= 5 << 20, "HTML %d bytes <= 5 MB" % os.path.getsize(h))
    check("Rank 5 on host000 arrives last" in p.stdout, "the verdict still names rank 5")
    rep = json.load(open(js))
    rows = list(csv.DictReader(open(cap)))
    check(len(rows) == n and [int(r["rank"]) for r in rows] == list(range(n)),
          "ranks.csv (written because the JSON is capped) has every rank: %d rows" % len(rows))
    check(rep["ranks_complete"] is False, "ranks_complete false")
    listed = [r["rank"] for r in rep["ranks"]]
    check(rep["ranks_listed"] == len(listed) < n, "ranks_listed %d = %d listed < %d"
          % (rep["ranks_listed"], len(listed), n))
    for name, arr in (("clock.ranks", rep["clock"]["ranks"]), ("breakdown", rep["breakdown"])):
        check([r["rank"] for r in arr] == listed, "%s lists the same ranks as ranks" % name)
    check(set(s["rank"] for s in rep["stragglers"]) <= set(listed), "stragglers listed ⊆ ranks")
    # The rule on the CSV's figures (9 significant digits, as in the JSON): every rank beyond a
    # cut (strictly) is listed, and every listed rank is at or beyond some cut (ties at a cut go
    # either way, as the rounding hides their order).
    lo_hi = {}
    for k in ("wall_s", "compute_s", "comm_s", "wait_s"):
        v = sorted(float(r[k]) for r in rows if r[k] != "")
        lo_hi[k] = (v[extreme - 1], v[len(v) - extreme])
    ow = sorted((float(r["others_waited_s"]) for r in rows if int(r["late_arrivals"])),
                reverse=True)
    ow_cut = ow[min(extreme, len(ow)) - 1] if ow else float("inf")
    lset = set(listed)
    must_list, may_list = {0}, {0}
    for r in rows:
        rk = int(r["rank"])
        for k, (lo, hi) in lo_hi.items():
            v = float(r[k])
            if v < lo or v > hi:
                must_list.add(rk)
            if v <= lo or v >= hi:
                may_list.add(rk)
        if int(r["late_arrivals"]):
            w = float(r["others_waited_s"])
            if w > ow_cut:
                must_list.add(rk)
            if w >= ow_cut:
                may_list.add(rk)
    check(must_list <= lset, "ranks beyond a cut listed: %d missing" % len(must_list - lset))
    check(lset <= may_list, "listed ranks are at the extremes: %d are not" % len(lset - may_list))
    check(len(lset) <= 4 * 2 * extreme + extreme + 1, "at most %d ranks listed" % len(lset))
    # The listed ranks' figures are the CSV's.
    byrank = {int(r["rank"]): r for r in rows}
    bad = 0
    for r in rep["ranks"]:
        c = byrank[r["rank"]]
        for k in ("wall_s", "comm_s", "compute_s", "wait_s"):
            bad += abs(r[k] - float(c[k])) > 1e-8 * max(1e-12, abs(r[k]))
        bad += r["calls"] != int(float(c["calls"])) or r["host"] != c["host"]
    for r in rep["clock"]["ranks"]:
        c = byrank[r["rank"]]
        bad += abs(r["offset_final_s"] - float(c["offset_final_s"])) > 1e-8 * max(
            1e-12, abs(r["offset_final_s"]))
    check(bad == 0, "listed figures equal the CSV's: %d differ" % bad)
    page = open(h).read()
    check("ranks.csv" in page and "--ranks-csv" in page, "the page says where every rank is")

    # Up to the bound every rank is listed, and the capped-only CSV is not written.
    d = synthetic(tmp, "many1024")
    js2, cap2 = os.path.join(tmp, "small.json"), os.path.join(tmp, "small.csv")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js2, "--ranks-csv-capped", cap2])
    rep = json.load(open(js2))
    check(rep["ranks_complete"] is True and rep["ranks_listed"] == 1024 == len(rep["ranks"]),
          "1024 ranks: all listed")
    check(not os.path.exists(cap2), "no ranks.csv when the JSON lists every rank")
    return 0


def case_comms_bounded(tmp):
    """Beyond 256 communicators the per-communicator tables list the busiest and fold each op's
    other rows into one row, "others" (report.h, CS_REPORT_COMMS_LISTED; passes/bound.c); ops.csv
    has every row.  On a synthetic run of 1,500 communicators: the listed set against the rule
    applied to the CSV's own figures, the folded rows' totals against the CSV's, the tables that
    name communicators against the listed set, and the sizes."""
    import csv
    n, cap = 1500, 256
    d = synthetic(tmp, "comms%d" % n)
    js, h, oc = (os.path.join(tmp, x) for x in ("c.json", "c.html", "ops.csv"))
    p = must([COMMSCOPE, "analyze", d, "--json", js, "--html", h, "--ops-csv-capped", oc])
    rep = json.load(open(js))
    rows = list(csv.DictReader(open(oc)))
    # world's 1 all-reduce row; per communicator one all-reduce row, a broadcast row on every fifth
    check(len(rows) == 1 + n + (n + 4) // 5 == rep["ops_total"],
          "ops.csv (written because the tables are folded) has every row: %d, ops_total %d"
          % (len(rows), rep["ops_total"]))
    check(rep["communicators_complete"] is False and rep["ops_complete"] is False,
          "communicators_complete and ops_complete false")
    check(rep["communicators_total"] == n + 1, "communicators_total %d = %d"
          % (rep["communicators_total"], n + 1))
    # The rule on the CSV's figures: world first, then by call time, bytes, calls, label.
    load = {}
    for r in rows:
        t = load.setdefault(r["comm"], [0.0, 0, 0])
        t[0] += float(r["time_s"])
        t[1] += int(r["bytes"])
        t[2] += int(r["calls"])
    order = sorted(load, key=lambda c: (c != "world", -round(load[c][0], 12), -load[c][1],
                                        -load[c][2], c))
    want = set(order[:cap])
    named = [c["comm"] for c in rep["communicators"]]
    check(named[-1] == "others" and set(named[:-1]) == want and rep["communicators_listed"] ==
          cap == len(named) - 1, "the %d busiest communicators listed, then 'others': %d "
          "listed, %d not the rule's" % (cap, len(named) - 1, len(set(named[:-1]) ^ want)))
    # Per op: the listed rows are the CSV's, and the "others" row holds the rest, summed.
    csv_by = {(r["op"], r["comm"]): r for r in rows}
    ops = set(r["op"] for r in rows)
    for op in sorted(ops):
        mine = [o for o in rep["ops"] if o["op"] == op]
        other = [o for o in mine if o["comm"] == "others"]
        listed = [o for o in mine if o["comm"] != "others"]
        for o in listed:
            c = csv_by.get((op, o["comm"]))
            check(c is not None and o["comm"] in want and int(c["calls"]) == o["calls"] and
                  int(c["bytes"]) == o["bytes"], "%s on %s: listed, as in ops.csv" % (op, o["comm"]))
        rest = [r for r in rows if r["op"] == op and r["comm"] not in
                set(o["comm"] for o in listed)]
        check(len(other) == (1 if rest else 0) and (not other or mine[-1] is other[0]),
              "%s: %d rows folded, into one 'others' row, last" % (op, len(rest)))
        if other:
            x = other[0]
            check(x["folded_comms"] == len(rest) and x["calls"] == sum(int(r["calls"]) for r in rest)
                  and x["bytes"] == sum(int(r["bytes"]) for r in rest) and
                  abs(x["time_s"] - sum(float(r["time_s"]) for r in rest)) <= 1e-8 * x["time_s"],
                  "%s: 'others' holds the %d other rows' totals: %r" % (op, len(rest), x))
            check(x["comm_size"] is None and x["algbw_gbps"] is None and x["busbw_gbps"] is None,
                  "%s: 'others' has no size and no bandwidth" % op)
    check(all(o["folded_comms"] == 0 for o in rep["ops"] if o["comm"] != "others"),
          "listed rows fold nothing")
    tops = rep["topology"]["ops"]
    check([(o["op"], o["comm"]) for o in tops] == [(o["op"], o["comm"]) for o in rep["ops"]],
          "the topology's op rows are the per-op table's")
    for name, arr in (("groups", rep["groups"]), ("overlap", rep["overlap"])):
        extra = set(g["comm"] for g in arr) - want
        check(not extra, "%s names only listed communicators: %d others" % (name, len(extra)))
    check(len(rep["groups"]) <= cap, "at most %d groups: %d" % (cap, len(rep["groups"])))
    for path, limit in ((js, 1 << 20), (h, 1 << 20)):
        check(os.path.getsize(path) <= limit, "%s: %d bytes <= %d (1,500 communicators)"
              % (path, os.path.getsize(path), limit))
    page = open(h).read()
    check("ops.csv" in page and "--ops-csv" in page and "the %d busiest" % cap in page,
          "the page says the table is folded and where every row is")
    check("--ops-csv FILE writes every row" in p.stdout, "so does the text")
    exe = chromium()
    if exe:  # the folded tables render, and show report.json's rows
        check_html(exe, h, rep)

    # Up to the bound nothing is folded, and the folded-only CSV is not written.
    d = synthetic(tmp, "comms200")
    js2, oc2 = os.path.join(tmp, "small.json"), os.path.join(tmp, "small.csv")
    must([COMMSCOPE, "analyze", d, "-q", "--json", js2, "--ops-csv-capped", oc2])
    rep = json.load(open(js2))
    check(rep["communicators_complete"] is True and rep["ops_complete"] is True and
          rep["communicators_total"] == rep["communicators_listed"] == 201 ==
          len(rep["communicators"]) and not any(o["comm"] == "others" for o in rep["ops"]),
          "200 communicators: all listed")
    check(not os.path.exists(oc2), "no ops.csv when nothing is folded")
    return 0


def case_traces_index(tmp):
    """RUN_DIR/traces.index (COMMSCOPE_GATHER; docs/trace-format.md): ranks whose traces stayed
    elsewhere are read where the index says, with the same report as from the run directory; a
    malformed line and a trace that cannot be read are problems that say what and where."""
    d = synthetic(tmp, "four")
    ref = os.path.join(tmp, "ref.json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", ref])
    away = os.path.join(tmp, "node1")
    os.makedirs(away)
    lines = ["# commscope traces index 1: rank host path size nonce where"]
    for r in range(4):
        name = "rank-%05d.cst" % r
        path = os.path.join(d, name)
        if r in (1, 2):
            shutil.move(path, os.path.join(away, name))
            path = os.path.join(away, name)
        lines.append("%d\tnode%d\t%s\t%d\t%016x\t%s" % (r, r // 2, path, os.path.getsize(path),
                                                      r, "local" if r in (1, 2) else "run_dir"))
    with open(os.path.join(d, "traces.index"), "w") as f:
        f.write("\n".join(lines + ["7\tnode9\ttoo few fields"]) + "\n")
    got = os.path.join(tmp, "got.json")
    p = run([COMMSCOPE, "analyze", d, "-q", "--json", got])
    a, b = json.load(open(ref)), json.load(open(got))
    for k in ("ranks", "ops", "stragglers", "breakdown", "instances", "communicators"):
        check(a[k] == b[k], "%s: the same read through the index" % k)
    probs = b["trace"]["problems"]
    check(p.returncode == 1 and any("traces.index line 6: not \"rank host path size nonce where\""
                                    in x for x in probs),
          "the malformed line is a problem: exit %d, %r" % (p.returncode, probs))
    # A copy of the run directory without rank 3's file: the index's run_dir entry still names
    # the original, which is not followed (rank 3 is missing from the copy).
    cp = os.path.join(tmp, "copy")
    shutil.copytree(d, cp)
    os.remove(os.path.join(cp, "rank-00003.cst"))
    p = run([COMMSCOPE, "analyze", cp, "-q", "--json", got])
    b = json.load(open(got))
    check(p.returncode == 1 and b["trace"]["missing_ranks"] == [3] and
          b["trace"]["ranks_found"] == 3, "a copy's missing rank is missing: %r" % b["trace"])
    os.remove(os.path.join(away, "rank-00002.cst"))
    p = run([COMMSCOPE, "analyze", d, "-q", "--json", got])
    b = json.load(open(got))
    want = "rank 2's trace stayed on host node1 at %s" % os.path.join(away, "rank-00002.cst")
    check(p.returncode == 1 and b["trace"]["missing_ranks"] == [2] and
          any(want in x for x in b["trace"]["problems"]),
          "rank 2 missing, and where it stayed: %r" % b["trace"]["problems"])
    return 0


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    case = globals().get("case_" + sys.argv[1])
    if not case:
        raise SystemExit("unknown case %s" % sys.argv[1])
    tmp = tempfile.mkdtemp(prefix="cs-report-")
    try:
        rc = case(tmp) or 0
    finally:
        if os.environ.get("CS_TEST_KEEP"):
            print("kept", tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    if rc == 77:
        return 77
    return verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
