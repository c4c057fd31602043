#!/usr/bin/env python3
"""ncclCommInitAll (one process, several devices) on the CPU NCCL test double: the communicators
of one call share one global id and each records its own rank, the size and its device, flagged
as held by one process; the analyzer joins them into one communicator of that size, with every
all-reduce counted on it and no problem reported.

Usage: test_initall.py; CS_BIN, CS_LIB, CS_TESTBIN from ctest.  Exit 0 pass, 1 fail.
"""
import collections
import glob
import os
import struct
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nccl as T  # noqa: E402

NDEV = 4
ITERS = 5
OP_INIT_ALL = 149
COMM_GPU_MULTI = 1


def comm_flags(path):
    """(id, my_rank) -> trailer flags of every NCCL communicator record, read independently."""
    with open(path, "rb") as f:
        data = f.read()
    out = {}
    off = 4096
    while off + 64 <= len(data):
        magic, kind, _thread, used, _crc, span = struct.unpack_from("<IHHIII", data, off)
        if magic == 0x4b4c4243 and kind == 2:
            pos, end = off + 64, off + 64 + used
            while pos < end:
                rb, ck, _op, cid = struct.unpack_from("<IHHQ", data, pos)
                size, my = struct.unpack_from("<ii", data, pos + 32)
                moff = (48 + 4 * size + 7) & ~7
                if ck == 2 and rb >= moff + 32:
                    out[(cid, my)] = struct.unpack_from("<I", data, pos + moff + 4)[0]
                pos += rb
        off += 16384 * max(span, 1)
    return out


def main():
    tmp = tempfile.mkdtemp(prefix="cs-initall-")
    rundir = os.path.join(tmp, "run")
    out = T.launch(os.path.join(T.TESTBIN, "cs_nccl_initall"), [str(NDEV), str(ITERS)], 1, rundir)
    rc, so, se = out[0]
    T.check(rc == 0, "the program runs and its all-reduces are right: %s" % se[-800:])
    members = {}
    for line in so.splitlines():
        w = line.split()
        if w[0] == "member":
            members[int(w[1])] = (int(w[2]), int(w[3]), int(w[4]))
    T.check(len(members) == NDEV, "NCCL reported %d members" % len(members))
    files = glob.glob(os.path.join(rundir, "rank-*.cst"))
    if not T.check(len(files) == 1, "one trace: %s" % files):
        return
    hdr, events, comms = T.read_trace(files[0])
    recs = [c for c in comms if c["kind"] == 2]
    T.check(len(recs) == NDEV, "%d NCCL communicator records, want %d" % (len(recs), NDEV))
    ids = {c["id"] for c in recs}
    T.check(len(ids) == 1 and 0 not in ids, "one shared id: %s" % ids)
    T.check(sorted(c["my_rank"] for c in recs) == list(range(NDEV)),
            "each member's own rank once: %s" % [c["my_rank"] for c in recs])
    flags = comm_flags(files[0])
    for c in recs:
        T.check(c["op"] == OP_INIT_ALL and c["size"] == NDEV, "record of rank %d: op %d size %d"
                % (c["my_rank"], c["op"], c["size"]))
        T.check(c["members"][c["my_rank"]] == 0, "rank %d is world rank 0" % c["my_rank"])
        # NCCL's own answer for that communicator: (user rank, count, device).
        want = [m for m in members.values() if m[0] == c["my_rank"]]
        T.check(want and c["cuda_dev"] == want[0][2] and want[0][1] == NDEV,
                "rank %d: device %s, NCCL says %s" % (c["my_rank"], c["cuda_dev"], want))
        T.check(flags.get((c["id"], c["my_rank"])) == COMM_GPU_MULTI,
                "rank %d: record flagged as one of several members in one process (%s)"
                % (c["my_rank"], flags.get((c["id"], c["my_rank"]))))
    ars = [e for e in events if e["op"] == 128]
    T.check(len(ars) == NDEV * ITERS and {e["comm"] for e in ars} == ids,
            "%d all-reduces on the shared id (%s)" % (len(ars), {e["comm"] for e in ars}))
    seqs = collections.Counter(e["seq"] for e in ars)
    T.check(sorted(seqs) == list(range(ITERS)) and set(seqs.values()) == {NDEV},
            "each sequence number once per device: %s" % dict(seqs))
    init = [e for e in events if e["op"] == OP_INIT_ALL]
    T.check(len(init) == 1 and init[0]["comm"] in ids and init[0]["aux"] == NDEV,
            "the ncclCommInitAll event names the communicator and its size: %s" % init)

    rows, rep, text = T.analyze(rundir)
    T.check(not rep["problems"], "no analyzer problems: %s" % rep["problems"])
    ar = [o for o in rep.get("ops", []) if o["op"] == "ncclAllReduce"]
    T.check(len(ar) == 1 and ar[0]["comm_size"] == NDEV and ar[0]["calls"] == NDEV * ITERS
            and ar[0]["bytes"] == NDEV * ITERS * 256 * 4,
            "report: one all-reduce row on a communicator of %d, %d calls: %s"
            % (NDEV, NDEV * ITERS, ar))
    groups = [g for g in rep.get("groups", []) if g.get("ranks") == [0] * NDEV]
    T.check(len(groups) == 1, "report: one communicator group of %d members, all rank 0: %s"
            % (NDEV, rep.get("groups")))
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
