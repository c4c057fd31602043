#!/usr/bin/env python3
"""The report views of real PyTorch profiler (Kineto) traces against numbers computed here from
the same files, independently of the analyzer (json module, exact decimal arithmetic).

Usage: test_kineto_views.py SHARED_DATA; CS_BIN names the build's bin/ folder.  Traces from
SHARED_DATA/kineto (README.md there); exit 77 when they are absent.

Computed here per rank and GPU (args.device) from the `kernel` events (ph X, negative durations
skipped), times in integer ns (µs with up to three decimals, read as decimals):
  NCCL   = union of kernels whose name starts with "nccl";
  compute = union of the other kernels, except names that look like communication
            (docs/kineto.md: rccl, msccl, nvshmem, allreduce, allgather, reducescatter, alltoall,
            sendrecv, cross_device_reduce, custom_ar, oneccl, gloo; case and '_' ignored);
  overlapped = |NCCL ∩ compute|, exposed = NCCL − overlapped.
Checked against: JSON ranks[] (gpu_comm_s, compute_s, gpu_overlapped_s, exposed_comm_s), the
breakdown (compute_s; collective_s + waiting_s = exposed on these ranks, which have no MPI calls;
waiting_s no more than min(wait_s, exposed), and the step budget's waiting on dlrm), the verdict's GPU sentence in the text, JSON and HTML reports
(totals and the hidden share), the HTML "On the GPU" sentence and per-GPU table, and the HTML
breakdown bars' data attributes; with Chromium installed, the page renders without console
errors and shows the JSON report's key numbers.
"""
import gzip
import html as htmlmod
import json
import os
import re
import subprocess
import sys
import tempfile
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_reports  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
failures = []
CANDIDATES = ("rccl", "msccl", "nvshmem", "allreduce", "allgather", "reducescatter", "alltoall",
              "sendrecv", "crossdevicereduce", "customar", "oneccl", "gloo")


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def near(a, b, what, tol=2e-9):
    """JSON numbers are %.9g of seconds: equal to the ns within the ninth digit."""
    return check(a is not None and abs(a - b) <= tol + 1e-8 * abs(b), "%s: %r vs %r" % (what, a, b))


def union(iv):
    iv = sorted(iv)
    out = []
    for b, e in iv:
        if out and b <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([b, e])
    return out


def length(u):
    return sum(e - b for b, e in u)


def intersect(a, b):
    i = j = n = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            n += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return n


def is_candidate(name):
    n = name.lower().replace("_", "")
    return any(c in n for c in CANDIDATES)


def independent(path):
    """{rank: {device: (nccl_ns, compute_ns, overlapped_ns)}} of one trace file."""
    op = gzip.open if path.endswith(".gz") else open
    with op(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    rank = int(doc["distributedInfo"]["rank"])
    dev = {}
    for e in doc["traceEvents"]:
        if e.get("cat") != "kernel" or e.get("ph") != "X":
            continue
        dur = Decimal(e["dur"])
        if dur < 0:
            continue
        b = int(Decimal(e["ts"]) * 1000)
        k = dev.setdefault(int(e["args"]["device"]), ([], []))
        name = e.get("name", "")
        if name.startswith("nccl"):
            k[0].append((b, b + int(dur * 1000)))
        elif not is_candidate(name):
            k[1].append((b, b + int(dur * 1000)))
    out = {}
    for d, (c, p) in dev.items():
        uc, up = union(c), union(p)
        out[d] = (length(uc), length(up), intersect(uc, up))
    return rank, out


def gpu_sentence(text):
    m = re.search(r"NCCL communication takes ([\d.]+) s on the GPU, ([\d.]+) % of it hidden "
                  r"behind compute kernels; ([\d.]+) s of it is exposed\.", text)
    return tuple(float(x) for x in m.groups()) if m else None


def case(tmp, name, inputs, files):
    js, ht = os.path.join(tmp, name + ".json"), os.path.join(tmp, name + ".html")
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto"] + inputs +
                       ["--json", js, "--html", ht], capture_output=True, text=True, timeout=300)
    if not check(p.returncode in (0, 1) and os.path.exists(js), "%s: analyze %d %s"
                 % (name, p.returncode, p.stderr[-500:])):
        return
    with open(js) as f:
        rep = json.load(f)
    with open(ht) as f:
        page = f.read()
    want = {}
    for path in files:
        r, devs = independent(path)
        want[r] = devs
    ranks = {r["rank"]: r for r in rep["ranks"]}
    bd = {b["rank"]: b for b in rep["breakdown"]}
    tot = [0, 0, 0]
    for r, devs in want.items():
        nccl = sum(v[0] for v in devs.values())
        comp = sum(v[1] for v in devs.values())
        ovl = sum(v[2] for v in devs.values())
        tot = [tot[0] + nccl, tot[1] + ovl, tot[2] + nccl - ovl]
        x = ranks.get(r)
        if not check(x is not None, "%s: rank %d in the report" % (name, r)):
            continue
        near(x["gpu_comm_s"], nccl / 1e9, "%s rank %d gpu_comm_s" % (name, r))
        near(x["compute_s"], comp / 1e9, "%s rank %d compute_s" % (name, r))
        near(x["gpu_overlapped_s"], ovl / 1e9, "%s rank %d gpu_overlapped_s" % (name, r))
        near(x["exposed_comm_s"], (nccl - ovl) / 1e9, "%s rank %d exposed_comm_s" % (name, r))
        b = bd[r]
        exposed = (nccl - ovl) / 1e9
        near(b["compute_s"], comp / 1e9, "%s breakdown rank %d compute" % (name, r))
        near(b["collective_s"] + b["waiting_s"], exposed, "%s breakdown rank %d collective + "
             "waiting = exposed NCCL" % (name, r))
        # Waiting as the step budget places it (docs/metrics.md "Waiting on a GPU timeline"):
        # never more than the waits at the instances or the exposed time; with the whole file
        # inside the timed steps (dlrm) it is the budget's waiting of the rank exactly.
        check(b["waiting_s"] <= min(x["wait_s"], exposed) + 2e-9, "%s breakdown rank %d "
              "waiting %r above min(wait %r, exposed %r)" % (name, r, b["waiting_s"],
                                                             x["wait_s"], exposed))
        bu = {y["rank"]: y for y in rep.get("budget", {}).get("ranks", [])}.get(r)
        if name == "dlrm" and check(bu and bu["steps"] == 1, "%s: budget of rank %d" % (name, r)):
            near(b["waiting_s"], bu["wait_s"], "%s breakdown rank %d waiting = budget's" % (name, r))
        check(b["p2p_s"] == 0 and b["completion_s"] == 0, "%s rank %d: no MPI segments" % (name, r))
        # The HTML bar of the rank (one bar per rank here) carries the same numbers.
        m = re.search(r'<g class="bar" data-rank="%d" data-wall="([^"]+)" data-compute="([^"]+)" '
                      r'data-comm="([^"]+)" data-wait="([^"]+)"' % r, page)
        if check(m, "%s: HTML bar of rank %d" % (name, r)):
            near(float(m.group(2)), comp / 1e9, "%s HTML bar rank %d compute" % (name, r))
            near(float(m.group(3)), exposed, "%s HTML bar rank %d communication" % (name, r))
        for d, v in devs.items():
            row = re.search(r"<tr><td>%d</td><td>%d</td><td>([\d.]+)</td><td>([\d.]+)</td>"
                            r"<td>([\d.]+)</td><td>([\d.]+)</td>" % (r, d), page)
            if check(row, "%s: HTML GPU row of rank %d GPU %d" % (name, r, d)):
                got = [float(g) for g in row.groups()]
                exp = [v[1] / 1e9, v[0] / 1e9, v[2] / 1e9, (v[0] - v[2]) / 1e9]
                check(all(abs(a - e) <= 6e-7 for a, e in zip(got, exp)),
                      "%s HTML GPU row rank %d GPU %d: %r vs %r" % (name, r, d, got, exp))
    # The verdict's GPU sentence, in the three renderings: X s, Y % hidden, Z s exposed.
    exp = (tot[0] / 1e9, 100.0 * tot[1] / tot[0] if tot[0] else 0, tot[2] / 1e9)
    page_text = htmlmod.unescape(re.sub(r"<[^>]+>", " ", page))
    for where, text in (("text", p.stdout), ("JSON", " ".join(rep["verdict"])),
                        ("HTML", page_text)):
        s = gpu_sentence(text)
        if check(s, "%s: GPU sentence in the %s report" % (name, where)):
            check(abs(s[0] - exp[0]) <= 6e-7 and abs(s[1] - exp[1]) <= 0.051 and
                  abs(s[2] - exp[2]) <= 6e-7, "%s %s GPU sentence %r vs %r" % (name, where, s, exp))
    m = re.search(r"NCCL kernels ran ([\d.]+) s .*? compute kernels ran during ([\d.]+) s of it "
                  r"\(overlap ratio ([\d.]+)\), so ([\d.]+) s of NCCL kernel time was exposed",
                  page_text, re.S)
    if check(m, "%s: HTML 'On the GPU' sentence" % name):
        got = [float(g) for g in m.groups()]
        check(abs(got[0] - exp[0]) <= 6e-7 and abs(got[1] - tot[1] / 1e9) <= 6e-7 and
              abs(got[2] - tot[1] / tot[0]) <= 6e-5 and abs(got[3] - exp[2]) <= 6e-7,
              "%s HTML overlap sentence %r vs %r" % (name, got, (exp[0], tot[1] / 1e9, exp[2])))
    # Verdict statements that need what the input has: one rank of sixteen has no load balance
    # and no complete instance to measure waits at.
    verdict = " ".join(rep["verdict"])
    if len(want) == 1:
        check("load balance" not in verdict, "%s: no load-balance statement for one rank: %s"
              % (name, verdict))
        check(rep["instances"]["matched"] == 0 and "waiting for other ranks is unknown: no "
              "collective instance is complete" in verdict, "%s: waiting share unknown: %s"
              % (name, verdict))
    else:
        check("load balance" in verdict and "of the communication time is waiting" in verdict,
              "%s: load balance and waiting share stated: %s" % (name, verdict))
    # Rendered in headless Chromium (when installed): no console errors, the JSON's key numbers
    # in the page (tests/report/test_reports.py's check).
    failures.extend(test_reports.rendered(ht, rep, "%s (Chromium)" % name))
    print("%s: %d ranks, NCCL %.6f s, overlapped %.6f s, exposed %.6f s (computed here)"
          % (name, len(want), tot[0] / 1e9, tot[1] / 1e9, tot[2] / 1e9))


def main():
    data = sys.argv[1] if len(sys.argv) > 1 else ""
    k = os.path.join(data, "kineto")
    dlrm = os.path.join(k, "dlrm_8ranks")
    neg = os.path.join(k, "hta", "negative_queue_length_values_check_rank0.json.gz")
    if not os.path.isdir(dlrm) or not os.path.exists(neg):
        print("SKIP: %s not found" % k)
        return 77
    tmp = tempfile.mkdtemp(prefix="cs-kviews-")
    try:
        files = sorted(os.path.join(dlrm, f) for f in os.listdir(dlrm) if f.endswith(".json"))
        case(tmp, "dlrm", [dlrm], files)
        case(tmp, "negative_queue", [neg], [neg])
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
