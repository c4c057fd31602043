#!/usr/bin/env python3
"""`commscope fabric` on a 4-host namespace cluster where host h3's benchmark process exits after
the first node-to-node round (COMMSCOPE_FABRIC_FAIL_NODE=2, a test hook of cs_fabric): mpirun ends
the job; commscope must name h3 as failed (from mpirun's report of rank 2, placed in round 2 of 3),
keep and judge the two links of round 1 (h1-h4 and h2-h3 by the round-robin schedule), leave the
other hosts unaccused, and exit 1 (the job did not finish).  Exit 77 (skip) without namespaces."""
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
    cmd = (f"COMMSCOPE_FABRIC_FAIL_NODE=2 {bindir}/commscope fabric --max-bytes 64K "
           f"--pair-bytes 1M --pair-iters 4 --json {out} -- mpirun $CS_CLUSTER_MPI_ARGS "
           f"-x COMMSCOPE_FABRIC_FAIL_NODE -np 4 --map-by node")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "4", "--rate", "400mbit", "--",
                        "sh", "-c", cmd], capture_output=True, text=True, timeout=240)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    check(r.returncode == 1, f"exit status 1 (the job failed) expected, got {r.returncode}")
    msg = ("commscope fabric: node h3 failed: rank 2 exited with status 1 during node-to-node "
           "round 2 of 3 (reported by mpirun)")
    check(msg in r.stderr, f"stderr names the failed node: {msg!r}")
    doc = json.load(open(out))
    check(doc["schema"] == "commscope-fabric/1" and not doc["complete"], "incomplete report")
    nodes = {n["host"]: n for n in doc["nodes"]}
    check(sorted(nodes) == ["h1", "h2", "h3", "h4"], f"every host reported: {sorted(nodes)}")
    check(nodes.get("h3", {}).get("status") == "failed", "h3 failed")
    check("rank 2 exited with status 1" in nodes.get("h3", {}).get("evidence", ""),
          "h3's evidence names rank 2")
    for h in ("h1", "h2", "h4"):
        check(nodes.get(h, {}).get("status") != "failed", f"{h} not failed")
    check(doc["suspects"] and doc["suspects"][0]["name"] == "h3", "h3 the first suspect")
    check(not any(s["name"] in ("h1", "h2", "h4") and "failed" in s["evidence"]
                  for s in doc["suspects"]), "no other host accused of failing")
    links = {(l["a"], l["b"]): l for l in doc["links"]}
    check(sorted(links) == [("h1", "h4"), ("h2", "h3")], f"round 1's links kept: {sorted(links)}")
    for l in links.values():
        check(l["gbps"] > 0 and l["latency_us"] > 0, f"link {l['a']}-{l['b']} has numbers")
    check(any("node h3 failed mid-benchmark" in n for n in doc["notes"]), "note names h3")
    check(any("2 of 6 node pairs measured" in n for n in doc["notes"]), "missing pairs noted")

sys.exit(1 if failures else 0)
