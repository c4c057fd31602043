#!/usr/bin/env python3
"""`commscope fabric` on a 4-host namespace cluster (cluster.sh) whose host h4 has a link limited
to a quarter of the others' rate: h4 must be the only suspect, its three links slow, the other
links ok, and every host named by its hostname.  Exit 77 (skip) where namespaces are unavailable."""
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
    out = os.path.join(tmp, "fabric.json")
    cmd = (f"{bindir}/commscope fabric --max-bytes 64K --pair-bytes 1M --pair-iters 4 "
           f"--json {out} -- mpirun $CS_CLUSTER_MPI_ARGS -np 4 --map-by node")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "4", "--rate", "400mbit",
                        "--slow", "h4=100mbit", "--", "sh", "-c", cmd],
                       capture_output=True, text=True, timeout=240)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    check(r.returncode == 3, f"exit status 3 (a slow node) expected, got {r.returncode}")
    doc = json.load(open(out))
    check(doc["schema"] == "commscope-fabric/1" and doc["complete"], "complete fabric report")
    nodes = {n["host"]: n for n in doc["nodes"]}
    check(sorted(nodes) == ["h1", "h2", "h3", "h4"], f"hosts named by hostname: {sorted(nodes)}")
    for h, n in nodes.items():
        check(n["status"] == ("slow" if h == "h4" else "ok"), f"{h} status {n['status']}")
    check([s["name"] for s in doc["suspects"]] == ["h4"], f"suspects {doc['suspects']}")
    check(len(doc["links"]) == 6, "every pair of the 4 hosts measured")
    for l in doc["links"]:
        slow = "h4" in (l["a"], l["b"])
        check(l["status"] == ("slow" if slow else "ok"), f"link {l['a']}-{l['b']}: {l['status']}")
        check(l["latency_us"] > 0 and l["gbps"] > 0, f"link {l} has numbers")
    ops = {c["op"] for c in doc["collectives"]}
    check(ops == {"allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"}, f"ops {ops}")
    check(max(c["bytes"] for c in doc["collectives"]) == 65536, "sweep reaches --max-bytes")

sys.exit(1 if failures else 0)
