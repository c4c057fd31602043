#!/usr/bin/env python3
"""The example training job (cs_train) under `commscope run` on a 4-host namespace cluster
(cluster.sh), 2 ranks per host: the report names the hosts by their hostnames (h1..h4, 2 ranks
each), has a topology snapshot of every host (COMMSCOPE_TOPOLOGY: a shared JUWELS Booster file, so
the NIC rate and with it the capacity are known), classifies the world communicator's collectives
as inter-host and reports inter- and intra-host bandwidth separately, with busbw as a percentage
of the bottleneck path's capacity.  Exit 77 (skip) where namespaces are unavailable."""
import glob
import json
import os
import subprocess
import sys
import tempfile

bindir = sys.argv[1]
topo_dir = sys.argv[2] if len(sys.argv) > 2 else ""
here = os.path.dirname(os.path.abspath(__file__))
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


files = sorted(glob.glob(os.path.join(topo_dir, "hwloc", "*JUWELS-Booster*.xml")))
if not files:
    print("SKIP: no JUWELS Booster topology file under", topo_dir, file=sys.stderr)
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run")
    cmd = (f"COMMSCOPE_TOPOLOGY={files[0]} {bindir}/commscope run -o {run} --quiet -- "
           f"mpirun $CS_CLUSTER_MPI_ARGS -np 8 --map-by slot {bindir}/cs_train --steps 5")
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "4", "--slots", "2", "--",
                        "sh", "-c", cmd], capture_output=True, text=True, timeout=240)
    print(r.stdout[-3000:])
    print(r.stderr[-3000:], file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    check(r.returncode == 0, f"exit status 0 expected, got {r.returncode}")
    rep = json.load(open(os.path.join(run, "report.json")))
    ranks = {x["rank"]: x["host"] for x in rep["ranks"]}
    check(sorted(set(ranks.values())) == ["h1", "h2", "h3", "h4"], f"hosts {ranks}")
    check(all(ranks[r] == f"h{r // 2 + 1}" for r in ranks), f"2 ranks per host by slot: {ranks}")
    topo = rep["topology"]
    hosts = {h["host"]: h for h in topo["hosts"]}
    check(sorted(hosts) == ["h1", "h2", "h3", "h4"], f"topology hosts {sorted(hosts)}")
    for name, h in hosts.items():
        check(h["ranks"] == 2, f"{name} has 2 ranks: {h['ranks']}")
        check(h["snapshot"] == f"topology/{name}.xml" and
              os.path.exists(os.path.join(run, h["snapshot"])), f"{name} snapshot {h['snapshot']}")
        check(h["nic_gbps"] and h["nic_gbps"] > 0, f"{name} NIC rate from the snapshot: {h}")
    ops = {(o["op"], o["comm"]): o for o in topo["ops"]}
    ar = ops.get(("MPI_Allreduce", "world"))
    check(ar is not None and ar["scope"] == "inter-host" and ar["path"] == "network",
          f"world allreduce is inter-host over the network: {ar}")
    busbw = {(o["op"], o["comm"]): o["busbw_gbps"] for o in rep["ops"]}
    if ar:
        cap = min(h["nic_gbps"] for h in hosts.values())
        check(ar["capacity_gbps"] == cap, f"capacity {ar['capacity_gbps']} = slowest NIC {cap}")
        b = busbw[("MPI_Allreduce", "world")]
        check(abs(ar["pct_of_capacity"] - 100 * b * 8 / cap) < 1e-6 * max(1, ar["pct_of_capacity"]),
              f"pct_of_capacity {ar['pct_of_capacity']} = busbw {b} GB/s x 8 / {cap} Gb/s x 100")
        # The HTML bandwidth chart draws the same capacity as a line, in GB/s of bus bandwidth.
        page = open(os.path.join(run, "report.html")).read()
        want = f": capacity {cap / 8:.3f} GB/s (network path, {cap:.0f} Gb/s"
        check(want in page, f"capacity line in report.html: {want!r}")
    bw = topo["bandwidth"]
    inter, intra = bw["inter_host"]["collectives"], bw["intra_host"]["collectives"]
    check(inter["bytes"] > 0 and inter["busbw_gbps"] > 0, f"inter-host collectives {inter}")
    # cs_train's collectives are all on MPI_COMM_WORLD, which spans the 4 hosts: nothing stays
    # inside one host.
    check(intra["bytes"] == 0 and intra["busbw_gbps"] is None, f"intra-host collectives {intra}")
    text = subprocess.run([f"{bindir}/commscope", "analyze", run], capture_output=True,
                          text=True).stdout
    check("inter-host   collectives" in text and "intra-host   collectives" in text,
          "text report shows both scopes")

sys.exit(1 if failures else 0)
