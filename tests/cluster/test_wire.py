#!/usr/bin/env python3
"""Wire capture on a 3-host namespace cluster (cluster.sh, docs/wire.md):

1. `commscope run --capture auto` of a job of all-reduces (ring forced) and all-to-alls (pairwise
   forced): the bytes on the wire between hosts match what the traced collectives imply, within the
   protocol overhead (docs/wire.md: 0.98..1.10 on these veth links), every host captured on eth0
   only, which is expected, and no warning.
2. The same job with MPI's TCP traffic forced onto eth1 (a second, rate-limited network) while eth0
   is the expected data interface: every host's eth1 is flagged as off the expected interface.
3. The capture helper without CAP_NET_RAW (setpriv drops it from the bounding set): one warning,
   the job's results and exit status unchanged, the trace analysis intact, the wire section says
   that nothing was captured.
4. A capture whose file cannot be written past 2 KiB (RLIMIT_FSIZE on the helper, SIGXFSZ ignored:
   the same failed write(2) as a full disk): one specific message naming the file and the error,
   the job's results and exit status unchanged, the trace analysis intact, each wire file read up
   to where it ends and said to end early.
5. --capture eth0,nosuch0: one message naming the missing interface, capture on eth0 goes on in
   full (wire bytes match the traced bytes as in 1), the job unaffected.
6. The runs of 1, 2 and 4 (traces and wire files of three hosts, two interfaces, files cut short)
   as the seeds of the structure-aware fuzzer (tests/unit/test_fuzz.c), which damages their wire
   files as well as their traces: the analysis must never crash, hang, print a non-finite number
   or write invalid JSON.
Exit 77 (skip) where namespaces are unavailable."""
import json
import os
import subprocess
import sys
import tempfile

bindir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
failures = 0
JOB = (f"mpirun $CS_CLUSTER_MPI_ARGS -np 3 --map-by node --mca coll_tuned_use_dynamic_rules 1 "
       f"--mca coll_tuned_allreduce_algorithm 4 --mca coll_tuned_alltoall_algorithm 2 "
       f"{bindir}/cs_wire_job 10 1048576")


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def cluster(cmd, *opts):
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "3", *opts, "--", "sh", "-c", cmd],
                       capture_output=True, text=True, timeout=300)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    return r


with tempfile.TemporaryDirectory() as tmp:
    # 1. Wire bytes vs traced bytes.
    run = os.path.join(tmp, "run1")
    r = cluster(f"{bindir}/commscope run -q -o {run} --capture auto -- {JOB}")
    check(r.returncode == 0, f"run 1 exit status {r.returncode}")
    check("wire_job ok" in r.stdout, "run 1: the job's results are right")
    w = json.load(open(os.path.join(run, "report.json")))["wire"]
    ratio = w["wire_bytes"] / w["traced_bytes"]
    print(f"run 1: traced {w['traced_bytes']} wire {w['wire_bytes']} ratio {ratio:.4f}")
    # Per iteration and rank: all-reduce ring 2(n-1)/n x 1 MiB; all-to-all (n-1)/n x its send
    # total (131070 doubles: 1 MiB rounded down to a multiple of 3 doubles).  10 iterations, 3 ranks.
    want = 10 * 3 * (4 / 3 * 1048576 + 2 / 3 * 131070 * 8)
    check(abs(w["traced_bytes"] - want) <= 30, f"traced bytes {w['traced_bytes']} vs {want}")
    check(0.98 <= ratio <= 1.10, f"wire/traced ratio {ratio} within the protocol overhead")
    ifs = {(i["host"], i["name"]): i for i in w["interfaces"]}
    check(sorted(ifs) == [("h1", "eth0"), ("h2", "eth0"), ("h3", "eth0")], f"interfaces {ifs}")
    check(all(i["expected"] is True for i in ifs.values()), "eth0 expected everywhere")
    peers = {(p["host"], p["peer"]): p for p in w["peers"]}
    check(len(peers) == 6, f"every ordered pair of hosts: {sorted(peers)}")
    for (h, p), v in peers.items():
        back = peers.get((p, h))
        check(back is not None and abs(v["bytes_tx"] - back["bytes_rx"]) <= 0.01 * v["bytes_tx"],
              f"{h}->{p}: sent {v['bytes_tx']} vs received at {p} {back and back['bytes_rx']}")
    check(not [x for x in w["warnings"] if "OFF THE EXPECTED" in x], f"no off-interface warning: {w['warnings']}")
    check(len(w["series"]) == 6 and all(sum(s["tx_bytes"]) > 0 for s in w["series"]), "series")
    # Each capture's own totals: complete, every interface row inside them (the rows count IP
    # between the job's hosts only), nothing cut short with the capture's snap length.
    caps = {c["host"]: c for c in w["captures"]}
    check(sorted(caps) == ["h1", "h2", "h3"], f"a capture per host: {sorted(caps)}")
    for h, c in caps.items():
        i = ifs.get((h, "eth0"), {"packets": 0, "bytes": 0})
        check(c["complete"] and c["captured"] and c["short_headers"] == 0 and c["bad_time"] == 0,
              f"{h}: capture complete, nothing cut short: {c}")
        check(i["packets"] <= c["ip_packets"] <= c["packets"] and i["bytes"] <= c["bytes"],
              f"{h}: interface {i['packets']} packets / {i['bytes']} bytes within the capture's {c}")

    # 2. MPI forced onto eth1 (rate-limited), eth0 expected.
    run = os.path.join(tmp, "run2")
    job2 = JOB.replace("$CS_CLUSTER_MPI_ARGS", "$(echo $CS_CLUSTER_MPI_ARGS | sed "
                       "'s|btl_tcp_if_include 10.77.0.0/24|btl_tcp_if_include 10.78.0.0/24|')")
    r = cluster(f"{bindir}/commscope run -q -o {run} --capture eth0,eth1 --capture-expect eth0 "
                f"-- {job2}", "--second", "200mbit")
    check(r.returncode == 0, f"run 2 exit status {r.returncode}")
    check("wire_job ok" in r.stdout, "run 2: the job's results are right")
    w = json.load(open(os.path.join(run, "report.json")))["wire"]
    ifs = {(i["host"], i["name"]): i for i in w["interfaces"]}
    for h in ("h1", "h2", "h3"):
        e1 = ifs.get((h, "eth1"))
        check(e1 is not None and e1["expected"] is False and e1["bytes"] > 1000000,
              f"{h} eth1 carries the job, not expected: {e1}")
        check(any("OFF THE EXPECTED INTERFACE" in x and f"left {h} through eth1" in x and
                  "instead of eth0" in x for x in w["warnings"]),
              f"{h}: traffic on eth1 flagged: {w['warnings']}")
    text = subprocess.run([f"{bindir}/commscope", "analyze", run], capture_output=True,
                          text=True).stdout
    check("WARNING: OFF THE EXPECTED INTERFACE" in text, "text report flags it loudly")

    # 3. No CAP_NET_RAW for the capture helper.
    run = os.path.join(tmp, "run3")
    wrap = os.path.join(tmp, "cs_capture_nocap")
    with open(wrap, "w") as f:
        f.write(f"#!/bin/sh\nexec setpriv --bounding-set -net_raw,-net_admin "
                f"--inh-caps -net_raw,-net_admin {bindir}/cs_capture \"$@\"\n")
    os.chmod(wrap, 0o755)
    r = cluster(f"COMMSCOPE_CAPTURE_BIN={wrap} {bindir}/commscope run -q -o {run} --capture eth0 "
                f"-- {JOB}")
    check(r.returncode == 0, f"run 3 exit status {r.returncode}")
    check("wire_job ok" in r.stdout, "run 3: the job's results are right")
    msgs = [l for l in r.stderr.splitlines() if "no permission to capture" in l]
    check(len(msgs) == 1 and "CAP_NET_RAW" in msgs[0] and "3 of the job's nodes" in msgs[0],
          f"said once: {msgs}")
    doc = json.load(open(os.path.join(run, "report.json")))
    check(doc["trace"]["ranks_found"] == 3 and not doc["trace"]["problems"],
          f"trace analysis intact: {doc['trace']}")
    w = doc["wire"]
    check(w["wire_bytes"] == 0 and w["traced_bytes"] > 0, "no wire bytes, traced bytes present")
    check(sum("no capture on this node" in x for x in w["warnings"]) == 3,
          f"each node without capture named: {w['warnings']}")

    # 4. Writing the wire file fails mid-capture.
    run = os.path.join(tmp, "run4")
    wrap = os.path.join(tmp, "cs_capture_small")
    with open(wrap, "w") as f:
        f.write(f"#!/bin/bash\ntrap '' XFSZ\nulimit -f 2\nexec {bindir}/cs_capture \"$@\"\n")
    os.chmod(wrap, 0o755)
    r = cluster(f"COMMSCOPE_CAPTURE_BIN={wrap} {bindir}/commscope run -q -o {run} --capture eth0 "
                f"--capture-bucket-ms 1 -- {JOB}")
    check(r.returncode == 0, f"run 4 exit status {r.returncode}")
    check("wire_job ok" in r.stdout, "run 4: the job's results are right")
    msgs = [l for l in r.stderr.splitlines() if "wire capture" in l]
    check(len(msgs) == 1 and "writing " in msgs[0] and "wire-h1.csw failed: File too large" in
          msgs[0] and "capture stopped there and the file ends early" in msgs[0] and
          "3 of the job's nodes stopped capturing early" in msgs[0], f"said once: {msgs}")
    doc = json.load(open(os.path.join(run, "report.json")))
    check(doc["trace"]["ranks_found"] == 3 and not doc["trace"]["problems"],
          f"run 4: trace analysis intact: {doc['trace']}")
    w = doc["wire"]
    check(0 < w["wire_bytes"] < w["traced_bytes"], f"run 4: wire bytes up to the cut: {w}")
    check(sum("ends early" in x for x in w["warnings"]) == 3, f"each cut file said: {w['warnings']}")
    check(sorted(i["host"] for i in w["interfaces"]) == ["h1", "h2", "h3"], "run 4: every host read")

    # 5. An interface that does not exist beside one that does.
    run = os.path.join(tmp, "run5")
    r = cluster(f"{bindir}/commscope run -q -o {run} --capture eth0,nosuch0 -- {JOB}")
    check(r.returncode == 0, f"run 5 exit status {r.returncode}")
    check("wire_job ok" in r.stdout, "run 5: the job's results are right")
    msgs = [l for l in r.stderr.splitlines() if "wire capture" in l]
    check(len(msgs) == 1 and "no interface named nosuch0 on this node" in msgs[0] and
          "3 of the job's nodes capture on their other interfaces only" in msgs[0],
          f"said once: {msgs}")
    doc = json.load(open(os.path.join(run, "report.json")))
    check(doc["trace"]["ranks_found"] == 3 and not doc["trace"]["problems"],
          f"run 5: trace analysis intact: {doc['trace']}")
    w = doc["wire"]
    check(0.98 <= w["wire_bytes"] / w["traced_bytes"] <= 1.10,
          f"run 5: capture on eth0 complete: {w['wire_bytes']} vs {w['traced_bytes']}")
    ifs = sorted((i["host"], i["name"]) for i in w["interfaces"])
    check(ifs == [("h1", "eth0"), ("h2", "eth0"), ("h3", "eth0")], f"run 5: interfaces {ifs}")
    check(sum("no interface named nosuch0" in x for x in w["warnings"]) == 3,
          f"run 5: each node's missing interface in the report: {w['warnings']}")

    # 6. Damaged wire files (and traces) of real captures.
    n = os.environ.get("CS_FUZZ_ITERATIONS", "300")
    p = subprocess.run([os.path.join(bindir, "test_fuzz"), "-n", n] +
                       [os.path.join(tmp, r) for r in ("run1", "run2", "run4")],
                       capture_output=True, text=True, timeout=1200)
    print(p.stdout[-3000:])
    check(p.returncode == 0, f"fuzzing the wire runs: exit {p.returncode}\n{p.stdout[-6000:]}\n"
          f"{p.stderr[-2000:]}")

sys.exit(1 if failures else 0)
