#!/usr/bin/env python3
"""Traces kept on the nodes (COMMSCOPE_GATHER=never): a 4-rank job over 2 namespace hosts
(cluster.sh), each writing to node-local storage that no other host sees (a tmpfs of its own,
COMMSCOPE_LOCAL_DIR).  Rank 0 writes traces.index; the analysis in h1 reads h1's traces where the
index says and names h2's, by host and path, as staying there; the default (auto) gathers all.
Exit 77 (skip) where namespaces are unavailable."""
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
    return cond


def cluster(tmp, gather):
    run = os.path.join(tmp, "run-" + gather)
    node = os.path.join(tmp, "node")
    cmd = (f"COMMSCOPE_GATHER={gather} COMMSCOPE_LOCAL_DIR={node}/%h {bindir}/commscope run "
           f"-o {run} --quiet -- mpirun $CS_CLUSTER_MPI_ARGS -np 4 --map-by slot "
           f"{bindir}/cs_test_halo")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "2", "--slots", "2", "--private",
                        node, "--", "sh", "-c", cmd], capture_output=True, text=True, timeout=240)
    print(r.stdout[-1500:])
    print(r.stderr[-2500:], file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    return r, run, node


def index(run):
    rows = []
    path = os.path.join(run, "traces.index")
    if not check(os.path.exists(path), "%s written" % path):
        return rows
    for line in open(path):
        if not line.startswith("#"):
            r, host, p, size, nonce, where = line.rstrip("\n").split("\t")
            rows.append((int(r), host, p, where))
    return rows


with tempfile.TemporaryDirectory() as tmp:
    # never: each trace stays on its host.  The analysis that commscope run makes in h1 reads
    # ranks 0 and 1 from h1's own storage and says where ranks 2 and 3 stayed.
    r, run, node = cluster(tmp, "never")
    check(r.returncode == 1, "the analysis in h1 cannot read h2's traces: exit %d" % r.returncode)
    rows = index(run)
    want = [(k, "h%d" % (1 + k // 2), os.path.join(node, "h%d" % (1 + k // 2), "rank-%05d.cst" % k),
             "local") for k in range(4)]
    check(rows == want, "traces.index: each rank's host and node-local path: %r" % rows)
    check(not [f for f in os.listdir(run) if f.endswith(".cst")], "no trace in the run directory")
    rep = json.load(open(os.path.join(run, "report.json")))
    t = rep["trace"]
    check(t["ranks_found"] == 2 and t["missing_ranks"] == [2, 3],
          "ranks 0 and 1 read from h1's storage, 2 and 3 missing: %r" % t)
    for k in (2, 3):
        check(any("rank %d's trace stayed on host h2 at %s" % (k, want[k][2]) in x
                  for x in t["problems"]), "rank %d: where it stayed: %r" % (k, t["problems"]))
    check(sorted(x["host"] for x in rep["ranks"]) == ["h1", "h1"], "the ranks read are h1's")

    # auto (4 ranks: gather): every trace brought into the run directory, the index says so.
    r, run, node = cluster(tmp, "auto")
    check(r.returncode == 0, "auto: exit %d" % r.returncode)
    rows = index(run)
    check([(k, h, w) for k, h, _, w in rows] == [(k, "h%d" % (1 + k // 2), "gathered")
                                                 for k in range(4)],
          "auto: every trace gathered: %r" % rows)
    rep = json.load(open(os.path.join(run, "report.json")))
    check(rep["trace"]["ranks_found"] == 4 and not rep["trace"]["problems"],
          "auto: all four ranks analysed: %r" % rep["trace"])

sys.exit(1 if failures else 0)
