#!/usr/bin/env python3
"""The HTML report of a native GPU run (CUPTI records, scripted by tests/unit/test_steps_gpu.c
--write: two ranks, four steps of 1000 us, every kernel time known) draws the representative
step with GPU lanes, and its table holds the step budget's numbers, which are known here from the
script: per step from step 1 on, rank 0 computes 500 us (a kernel crossing the boundary gives its
second half), its NCCL kernels run 320 us, 50 of them under a compute kernel, 270 exposed, and the
GPU is idle 230 us; rank 1: 600, 170, 0, 170, 230.  The text report's step table has the Idle
column (230 us on both ranks).  With Chromium installed the page renders without console errors
and shows the JSON report's key numbers (test_reports.check_html).

Usage: test_gpu_timeline.py TEST_STEPS_GPU; CS_BIN names the build's bin/ folder.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_reports  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def main():
    tmp = tempfile.mkdtemp(prefix="cs-gtl-")
    try:
        run = os.path.join(tmp, "run")
        os.mkdir(run)
        p = subprocess.run([sys.argv[1], "--write", run], capture_output=True, text=True)
        if not check(p.returncode == 0, "writing the scripted run: %s" % p.stderr[-300:]):
            return 1
        js, ht = os.path.join(tmp, "r.json"), os.path.join(tmp, "r.html")
        p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", run, "--json", js,
                            "--html", ht], capture_output=True, text=True, timeout=120)
        if not check(p.returncode in (0, 1), "analyze %d %s" % (p.returncode, p.stderr[-300:])):
            return 1
        with open(js) as f:
            rep = json.load(f)
        with open(ht) as f:
            page = f.read()
        m = re.search(r"<p>Step (\d+), the median of the timed steps", page)
        check(m and 1 <= int(m.group(1)) <= 3, "a timed step is drawn")
        table = page.split('<table id="timeline-gpu">', 1)[-1].split("</table>", 1)[0]
        rows = {int(r[0]): [float(x) for x in r[1:]] for r in re.findall(
            r"<tr><td>(\d+)</td><td>([\d.]+)</td><td>([\d.]+)</td><td>([\d.]+)</td>"
            r"<td>([\d.]+)</td><td>([\d.]+)</td><td>[^<]*</td><td>(-?[\d.]+)</td></tr>", table)}
        want = {0: [1000, 500, 320, 50, 270, 230], 1: [1000, 600, 170, 0, 170, 230]}
        for r, w in want.items():
            got = rows.get(r)
            if check(got, "HTML timeline row of rank %d" % r):
                check(all(abs(a - b * 1e-6) <= 6e-7 for a, b in zip(got, w)),
                      "rank %d: shown %r, scripted %r us" % (r, got, w))
            g = re.search(r'<g class="tlgpu" data-rank="%d">(.*?)</g>' % r, page)
            if check(g, "GPU lanes of rank %d drawn" % r):
                check(g.group(1).count("NCCL kernels overlapped by compute (world)") == (r == 0),
                      "rank %d: overlapped piece drawn only where a compute kernel ran" % r)
                check(g.group(1).count("NCCL kernels exposed (world)") == 2,
                      "rank %d: two exposed pieces on the world lane" % r)
        lines = p.stdout.split("@--- Time per step", 1)[-1].split("@---", 1)[0].splitlines()
        check(len(lines) > 3 and lines[1].split()[-1] == "Idle", "Idle column in the step table")
        for ln in lines[2:5]:
            f = ln.split()
            check(len(f) == 9 and abs(float(f[-1]) - 230e-6) <= 6e-7, "Idle 230 us: %r" % ln)
        failures.extend(test_reports.rendered(ht, rep))
    finally:
        subprocess.run(["rm", "-rf", tmp])
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
