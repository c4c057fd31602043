#!/usr/bin/env python3
"""The hang diagnosis of a job over hosts one of which stops: cs_test_hang nodestop under
`commscope run` on a 2-host namespace cluster (cluster.sh), 2 ranks per host; every rank on h2
stops making progress outside MPI while the ranks on h1 wait in MPI_Allreduce, and `timeout`
ends the job.  The
analysis must name the all-reduce, ranks 2 and 3 as never entering it, h2 as the host none of
whose ranks did, and the ranks by host.  Exit 77 (skip) where namespaces are unavailable."""
import json
import os
import re
import subprocess
import sys
import tempfile

bindir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run")
    cmd = (f"{bindir}/commscope run -o {run} --quiet -- timeout -s TERM 8 "
           f"mpirun $CS_CLUSTER_MPI_ARGS -np 4 --map-by slot {bindir}/cs_test_hang nodestop")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "2", "--slots", "2", "--",
                        "sh", "-c", cmd], capture_output=True, text=True, timeout=240)
    print(r.stdout[-2000:])
    print(r.stderr[-2000:], file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    check(r.stdout.count("ready") == 4, "every rank set up: %r" % r.stdout[-400:])
    js = os.path.join(tmp, "hang.json")
    q = subprocess.run([os.path.join(bindir, "commscope"), "analyze", run, "--json", js],
                       capture_output=True, text=True, timeout=120)
    check(q.returncode == 4, "analyze exits 4 for the stopped job: %d %s"
          % (q.returncode, q.stderr[-400:]))
    rep = json.load(open(js)) if os.path.exists(js) else {}
    g = rep.get("hang") or {}
    check(g.get("hung") is True, "hung: %r" % g.get("hung"))
    c = (g.get("collectives") or [{}])[0]
    check(c.get("op") == "MPI_Allreduce" and c.get("comm") == "world",
          "stuck in the all-reduce on world: %r" % c)
    check(sorted(e["rank"] for e in c.get("entered", [])) == [0, 1] and c.get("missing") == [2, 3],
          "ranks 0, 1 entered it, 2 and 3 never did: %r" % c)
    check(c.get("missing_hosts") == ["h2"], "h2 is the host that stopped: %r" % c)
    hosts = {x["rank"]: x["host"] for x in g.get("ranks", [])}
    check(hosts.get(2) == "h2" and hosts.get(3) == "h2" and hosts.get(0) == "h1",
          "ranks named by host: %r" % hosts)
    verdict = rep.get("verdict", [])
    check(bool(verdict) and "MPI_Allreduce" in verdict[0] and "every rank of host h2" in verdict[0],
          "the verdict leads with the stopped host: %r" % verdict[:2])


# The same job with its traces on node-local storage (COMMSCOPE_LOCAL_DIR on a tmpfs of each
# host's own, which no other host sees, so the launcher on h1 sees none of h2's) and the live
# watch: the ranks report their progress to the root service of `commscope run`; when none has
# completed a call for the timeout, every rank's live trace comes over as a snapshot and the
# diagnosis is that of the job above, made while it runs; then the job is ended.  (--root: the
# namespace hosts' names do not resolve, their address does.)
with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run")
    node = os.path.join(tmp, "node")
    cmd = (f"COMMSCOPE_LOCAL_DIR={node}/%h {bindir}/commscope run -o {run} --quiet "
           f"--hang-timeout 3 --root 10.77.0.1:0 -- timeout -s KILL 60 "
           f"mpirun $CS_CLUSTER_MPI_ARGS -np 4 --map-by slot {bindir}/cs_test_hang nodestop")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "2", "--slots", "2", "--private",
                        node, "--", "sh", "-c", cmd], capture_output=True, text=True,
                       timeout=240)
    print(r.stdout[-2000:])
    print(r.stderr[-3000:], file=sys.stderr)
    check(r.stdout.count("ready") == 4, "node-local: every rank set up: %r" % r.stdout[-400:])
    check("4 rank(s) answered through the root service: 4 live trace(s) copied" in r.stderr,
          "node-local: every rank's live trace came over the root service: %r" % r.stderr[-1500:])
    runf = open(os.path.join(run, "commscope-run.txt")).read() \
        if os.path.exists(os.path.join(run, "commscope-run.txt")) else ""
    check("hang: no rank completed a call" in runf and "diagnosis in hang.txt" in runf
          and "hang_action: SIGTERM" in runf, "node-local: diagnosed live and ended: %r" % runf)
    m = re.search(r"hang: no rank completed a call for ([0-9.]+) s", runf)
    check(m and 3 <= float(m.group(1)) < 3 + 5, "node-local: fired within the timeout + 5 s: %r"
          % (m and m.group(0)))
    js = os.path.join(run, "hang.json")
    rep = json.load(open(js)) if os.path.exists(js) else {}
    g = rep.get("hang") or {}
    c = (g.get("collectives") or [{}])[0]
    check(g.get("hung") is True and c.get("op") == "MPI_Allreduce" and c.get("missing") == [2, 3]
          and c.get("missing_hosts") == ["h2"],
          "node-local: the live diagnosis names the all-reduce, ranks 2, 3 and host h2: %r" % c)
    hosts = {x["rank"]: x["host"] for x in g.get("ranks", [])}
    check(hosts == {0: "h1", 1: "h1", 2: "h2", 3: "h2"}, "node-local: ranks by host: %r" % hosts)

sys.exit(1 if failures else 0)
