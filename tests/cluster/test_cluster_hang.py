#!/usr/bin/env python3
"""The hang diagnosis of a job over hosts one of which stops: cs_test_hang nodestop under
`commscope run` on a 2-host namespace cluster (cluster.sh), 2 ranks per host; every rank on h2
stops making progress outside MPI while the ranks on h1 wait in MPI_Allreduce, and `timeout`
ends the job.  The
analysis must name the all-reduce, ranks 2 and 3 as never entering it, h2 as the host none of
whose ranks did, and the ranks by host.  Exit 77 (skip) where namespaces are unavailable."""
import json
import os
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

sys.exit(1 if failures else 0)
