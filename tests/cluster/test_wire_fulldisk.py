#!/usr/bin/env python3
"""A real full disk during wire capture (docs/wire.md, "Problems while capturing"): every host
writes into a local directory of its own (COMMSCOPE_LOCAL_DIR=.../local-%h, as on nodes without
a shared filesystem), where its wire file wire-hN.csw is a link into a tmpfs of its own of 8 KiB,
mounted by this test (root only; skip 77 otherwise), so the capture helper's writes fail with ENOSPC part-way through
a 3-host job of 80 rounds of all-reduces and all-to-alls captured in 1 ms buckets (long enough
that its buckets cannot fit in 8 KiB however fast it runs).  Expected: one message from
rank 0 naming the file and "No space left on device" for all three nodes, the job's results and
exit status unchanged, the trace analysis intact (3 ranks, no problems, its collectives), and each
wire file read up to where it ends and said to end early."""
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
       f"{bindir}/cs_wire_job 80 1048576")


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


if os.geteuid() != 0:
    print("SKIP: mounting a tmpfs needs root")
    sys.exit(77)

with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run")
    mounts = []
    try:
        for h in ("h1", "h2", "h3"):
            mnt = os.path.join(tmp, f"small-{h}")
            os.mkdir(mnt)
            r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8k", "tmpfs", mnt],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"SKIP: cannot mount a tmpfs: {r.stderr.strip()}")
                sys.exit(77)
            mounts.append(mnt)
            local = os.path.join(tmp, f"local-{h}")
            os.mkdir(local)
            os.symlink(os.path.join(mnt, f"wire-{h}.csw"), os.path.join(local, f"wire-{h}.csw"))
        r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "3", "--", "sh", "-c",
                            f"COMMSCOPE_LOCAL_DIR={tmp}/local-%h "
                            f"{bindir}/commscope run -q -o {run} --capture eth0 "
                            f"--capture-bucket-ms 1 -- {JOB}"],
                           capture_output=True, text=True, timeout=300)
        print(r.stdout)
        print(r.stderr, file=sys.stderr)
        if r.returncode == 77:
            sys.exit(77)
        check(r.returncode == 0, f"exit status {r.returncode}")
        check("wire_job ok" in r.stdout, "the job's results are right")
        msgs = [l for l in r.stderr.splitlines() if "wire capture" in l]
        check(len(msgs) == 1 and f"writing {tmp}/local-h1/wire-h1.csw failed: No space left on "
              "device"
              in msgs[0] and "capture stopped there and the file ends early" in msgs[0] and
              "3 of the job's nodes stopped capturing early" in msgs[0] and
              "the job is not affected" in msgs[0], f"said once: {msgs}")
        for mnt in mounts:
            st = os.statvfs(mnt)
            check(st.f_bfree == 0 or st.f_bavail * st.f_frsize < 4096,
                  f"{mnt}: the tmpfs really filled up ({st.f_bavail} blocks left)")
        doc = json.load(open(os.path.join(run, "report.json")))
        check(doc["trace"]["ranks_found"] == 3 and not doc["trace"]["problems"],
              f"trace analysis intact: {doc['trace']}")
        ops = {o["op"] for o in doc["ops"]}
        check({"MPI_Allreduce", "MPI_Alltoall"} <= ops, f"the job's collectives analysed: {ops}")
        w = doc["wire"]
        check(0 < w["wire_bytes"] < w["traced_bytes"], f"wire bytes up to the cut: {w['wire_bytes']}")
        check(sum("ends early" in x for x in w["warnings"]) == 3,
              f"each cut file said: {w['warnings']}")
        check(sorted(i["host"] for i in w["interfaces"]) == ["h1", "h2", "h3"], "every host read")
    finally:
        for mnt in mounts:
            subprocess.run(["umount", mnt])

sys.exit(1 if failures else 0)
