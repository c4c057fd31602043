#!/usr/bin/env python3
"""The representative step's GPU lanes on real PyTorch profiler (Kineto) traces, against numbers
computed here from the same files, independently of the analyzer (json module, exact decimals).

Usage: test_kineto_timeline.py SHARED_DATA; CS_BIN names the build's bin/ folder.  Traces from
SHARED_DATA/kineto/dlrm_8ranks (README.md there); exit 77 when they are absent.

Computed here per rank: the step windows from the `ProfilerStep#N` ranges (step k from the start
of range k to the start of range k + 1, the last one to its range's end; docs/kineto.md), and
within the window of the step the HTML report shows ("Step K, the median ..."), kernels clipped
to it: NCCL = union of kernels named nccl*, compute = union of the other kernels except the
communication candidates (test_kineto_views.py), overlapped = |NCCL ∩ compute|,
exposed = NCCL - overlapped, idle = window - |NCCL ∪ compute|.  Checked against the HTML table
`timeline-gpu` (one row per shown rank), the JSON step budget of the rank when the run has one
timed step (then the budget is that step's: compute_s, idle_s, and gradient sync + comm + wait =
exposed), the step's overlap ratio in JSON steps.per_step, and the lanes drawn in the chart (one
group per rank, a lane per communicator).  With Chromium installed the page renders without
console errors (test_reports.check_html).
"""
import json
import os
import re
import subprocess
import sys
import tempfile
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_kineto_views import is_candidate, union, length, intersect  # noqa: E402
import test_reports  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def clip(iv, lo, hi):
    return [(max(b, lo), min(e, hi)) for b, e in iv if min(e, hi) > max(b, lo)]


def per_rank(path):
    with open(path) as f:
        doc = json.load(f, parse_float=Decimal)
    rank = int(doc["distributedInfo"]["rank"])
    steps, nccl, comp = [], [], []
    for e in doc["traceEvents"]:
        if e.get("ph") != "X":
            continue
        b = int(Decimal(e["ts"]) * 1000)
        dur = int(Decimal(e.get("dur", 0)) * 1000)
        name = e.get("name", "")
        if name.startswith("ProfilerStep#"):
            steps.append((b, b + dur))
        if e.get("cat") != "kernel" or dur < 0:
            continue
        if name.startswith("nccl"):
            nccl.append((b, b + dur))
        elif not is_candidate(name):
            comp.append((b, b + dur))
    steps.sort()
    bounds = [s[0] for s in steps] + [steps[-1][1]] if steps else []
    return rank, bounds, nccl, comp


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else ""
    dlrm = os.path.join(data, "kineto", "dlrm_8ranks")
    if not os.path.isdir(dlrm):
        print("SKIP: %s not found" % dlrm)
        return 77
    tmp = tempfile.mkdtemp(prefix="cs-ktl-")
    try:
        js, ht = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.html")
        p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto", dlrm,
                            "--json", js, "--html", ht], capture_output=True, text=True,
                           timeout=300)
        if not check(p.returncode in (0, 1), "analyze %d %s" % (p.returncode, p.stderr[-500:])):
            return 1
        with open(js) as f:
            rep = json.load(f)
        with open(ht) as f:
            page = f.read()
        m = re.search(r"<p>Step (\d+), the median of the timed steps", page)
        if not check(m, "the step timeline is drawn for the Kineto import"):
            return 1
        K = int(m.group(1))
        rows = {int(r[0]): [float(x) for x in r[1:]] for r in re.findall(
            r"<tr><td>(\d+)</td><td>([\d.]+)</td><td>([\d.]+)</td><td>([\d.]+)</td>"
            r"<td>([\d.]+)</td><td>([\d.]+)</td><td>[^<]*</td><td>(-?[\d.]+)</td></tr>",
            page.split('<table id="timeline-gpu">', 1)[-1].split("</table>", 1)[0])}
        files = sorted(os.path.join(dlrm, f) for f in os.listdir(dlrm) if f.endswith(".json"))
        check(len(rows) == len(files), "one GPU row per rank: %d of %d" % (len(rows), len(files)))
        budget = {b["rank"]: b for b in rep["budget"]["ranks"]}
        one_step = rep["steps"]["timed"] == 1
        tot_n = tot_o = 0
        for path in files:
            r, bounds, nccl, comp = per_rank(path)
            if not check(K + 1 < len(bounds), "rank %d has step %d" % (r, K)):
                continue
            lo, hi = bounds[K], bounds[K + 1]
            un, uc = union(clip(nccl, lo, hi)), union(clip(comp, lo, hi))
            n, c, o = length(un), length(uc), intersect(un, uc)
            idle = (hi - lo) - (n + c - o)
            want = [(hi - lo) / 1e9, c / 1e9, n / 1e9, o / 1e9, (n - o) / 1e9, idle / 1e9]
            tot_n += n
            tot_o += o
            got = rows.get(r)
            if check(got, "HTML timeline row of rank %d" % r):
                check(all(abs(a - b) <= 6e-7 for a, b in zip(got, want)),
                      "rank %d step %d: shown %r, computed %r" % (r, K, got, want))
            b = budget.get(r)
            if one_step and check(b, "budget of rank %d" % r):
                exposed = b["gradient_sync_s"] + sum(b["comm_s"].values()) + b["wait_s"]
                check(abs(b["compute_s"] - c / 1e9) <= 2e-9 and abs(b["idle_s"] - idle / 1e9)
                      <= 2e-9 and abs(exposed - (n - o) / 1e9) <= 4e-9,
                      "rank %d: budget %r vs computed compute %d idle %d exposed %d ns"
                      % (r, b, c, idle, n - o))
            g = re.search(r'<g class="tlgpu" data-rank="%d">(.*?)</g>' % r, page)
            if check(g, "GPU lanes of rank %d drawn" % r):
                check("GPU compute</text>" in g.group(1) and ">world</text>" in g.group(1),
                      "rank %d: compute lane and the world communicator's lane" % r)
                check(("NCCL kernels exposed (world)" in g.group(1)) == (n - o > 0),
                      "rank %d: exposed NCCL pieces drawn" % r)
        ps = [s for s in rep["steps"]["per_step"] if s["index"] == K]
        if check(ps and tot_n, "step %d in steps.per_step" % K):
            check(abs(ps[0]["overlap_ratio"] - tot_o / tot_n) <= 1e-8,
                  "step %d overlap ratio %r vs computed %r" % (K, ps[0]["overlap_ratio"],
                                                                tot_o / tot_n))
        # The text report: Idle is a column of the step table when GPU timelines exist (the
        # budget's idle_s per rank), the footnote says so, and the GPU/NIC affinity note names
        # what an import lacks instead of claiming the traces record no GPU.
        lines = p.stdout.split("@--- Time per step", 1)[-1].split("@---", 1)[0].splitlines()
        check(lines and lines[1].split()[-1] == "Idle", "Idle column in the step table")
        for ln in lines[2:]:
            f = ln.split()
            if f and f[0].isdigit() and int(f[0]) in budget:
                check(abs(float(f[-1]) - budget[int(f[0])]["idle_s"]) <= 6e-7,
                      "text Idle of rank %s: %s" % (f[0], ln))
        check("idle cannot be told from compute without a GPU timeline)" not in p.stdout and
              "idle on the GPU" not in p.stdout, "no footnote claiming idle is unknown")
        m = re.search(r"gpu_nic_affinity: not checked: (.*)", p.stdout)
        check(m and "no GPU per rank" not in m.group(1) and "CUDA device" in m.group(1) and
              "topology snapshot" in m.group(1), "affinity note for an import: %r"
              % (m.group(1) if m else None))
        check(rep["topology"]["gpu_nic_affinity"]["reason"] == m.group(1) if m else False,
              "the JSON gives the same reason")
        failures.extend(test_reports.rendered(ht, rep))
        print("step %d: NCCL %.6f s, overlapped %.6f s over %d ranks (computed here)"
              % (K, tot_n / 1e9, tot_o / 1e9, len(files)))
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
