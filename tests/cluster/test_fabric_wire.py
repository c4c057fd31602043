#!/usr/bin/env python3
"""`commscope fabric --capture auto` on a 4-host namespace cluster (cluster.sh) whose host h4 is
limited to 100 Mbit/s and the others to 400 Mbit/s (docs/wire.md, "Wire evidence in commscope
fabric"):

- every link verdict carries wire evidence from both hosts' captures: the interface (eth0, an
  expected one), bytes on the wire vs the bytes the pair test sent (exact count from the
  benchmark's parameters; the ratio within the protocol overhead), retransmissions, and the rate
  on the wire each way;
- h4's links run at a quarter of the others' rate on the wire too, and the healthy links carry no
  wire warning;
- each host writes into its own local directory (COMMSCOPE_LOCAL_DIR=.../local-%h): the wire files
  reach the run directory only through the gather over MPI at MPI_Finalize, identical to the
  node's own copy.
Exit 77 (skip) where namespaces are unavailable."""
import json
import os
import subprocess
import sys
import tempfile

bindir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
failures = 0
PAIR_BYTES, PAIR_ITERS, LAT_ITERS = 1 << 20, 4, 50


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "fabric.json")
    run = os.path.join(tmp, "run")
    local = os.path.join(tmp, "local-%h")
    cmd = (f"COMMSCOPE_LOCAL_DIR={local} {bindir}/commscope fabric --max-bytes 64K "
           f"--pair-bytes 1M --pair-iters {PAIR_ITERS} --capture auto -o {run} --json {out} -- "
           f"mpirun $CS_CLUSTER_MPI_ARGS -np 4 --map-by node")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "4", "--rate", "400mbit",
                        "--slow", "h4=100mbit", "--", "sh", "-c", cmd],
                       capture_output=True, text=True, timeout=240)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    check(r.returncode == 3, f"exit status 3 (a slow node) expected, got {r.returncode}")
    doc = json.load(open(out))
    check([s["name"] for s in doc["suspects"]] == ["h4"], f"suspects {doc['suspects']}")
    check(not [n for n in doc["notes"] if n.startswith("wire")], f"no wire notes: {doc['notes']}")
    links = {(l["a"], l["b"]): l for l in doc["links"]}
    check(len(links) == 6, f"every pair measured: {sorted(links)}")
    # What the pair test sends (topology/fabric_bench.c): ping-pongs of 8 bytes each way
    # (2 warm-up + 50), a warm-up stream, two timed streams, a 1-byte acknowledgement per stream.
    sent = (LAT_ITERS + 2) * 16 + PAIR_BYTES * (2 * PAIR_ITERS + 1) + 3
    healthy_rates = []
    for (a, b), l in links.items():
        w = l["wire"]
        check(w is not None, f"{a}-{b}: wire evidence present")
        if w is None:
            continue
        print(f"{a}-{b}: status {l['status']} wire ratio {w['ratio']} rates {w['gbps_ab']} "
              f"{w['gbps_ba']} retransmits {w['retransmits_ab']}+{w['retransmits_ba']}")
        check(w["interfaces"] == ["eth0"] and w["expected"] is True, f"{a}-{b} on eth0: {w}")
        check(w["captured_by"] == "both", f"{a}-{b}: both hosts' captures used")
        check(w["sent_bytes"] == sent, f"{a}-{b}: sent {w['sent_bytes']} vs {sent}")
        check(1.0 <= w["wire_bytes"] / sent <= 1.10, f"{a}-{b}: wire/sent {w['wire_bytes'] / sent}")
        # One way carries the warm-up stream too: (iters + 1) vs iters MiB, plus headers.
        check(w["bytes_ab"] >= (PAIR_ITERS + 1) * PAIR_BYTES and
              w["bytes_ba"] >= PAIR_ITERS * PAIR_BYTES, f"{a}-{b}: bytes each way {w}")
        check(w["gbps_ab"] > 0 and w["gbps_ba"] > 0, f"{a}-{b}: a rate each way")
        check("wire:" in l["evidence"], f"{a}-{b}: the verdict's evidence cites the wire")
        if "h4" not in (a, b):
            check(w["warnings"] == [], f"healthy link {a}-{b} has no wire warning: {w['warnings']}")
            healthy_rates += [w["gbps_ab"], w["gbps_ba"]]
    for (a, b), l in links.items():
        w = l["wire"]
        if "h4" in (a, b) and w and healthy_rates:
            check(max(w["gbps_ab"], w["gbps_ba"]) < 0.5 * min(healthy_rates),
                  f"{a}-{b}: slower on the wire ({w['gbps_ab']}, {w['gbps_ba']}) than the healthy "
                  f"links ({min(healthy_rates)})")
    check("links on the wire" in r.stdout, "text report has the wire table")
    check(not [x for x in r.stdout.splitlines()
               if "WARNING: link" in x and "h4" not in x], "no wire warning on healthy links")
    # The gather: every node's wire file in the run directory, equal to its local copy.
    for h in ("h1", "h2", "h3", "h4"):
        mine = os.path.join(tmp, f"local-{h}", f"wire-{h}.csw")
        there = os.path.join(run, f"wire-{h}.csw")
        check(os.path.exists(mine), f"{h} wrote its wire file locally")
        check(os.path.exists(there) and os.path.exists(mine) and
              open(mine, "rb").read() == open(there, "rb").read(),
              f"{h}'s wire file gathered into the run directory")

sys.exit(1 if failures else 0)
