#!/usr/bin/env python3
"""NCCL interception tests without a GPU: processes started without MPI (rank from RANK /
WORLD_SIZE) under LD_PRELOAD=libcommscope.so, against the CPU NCCL test double
(tests/fakes/fake_nccl.c) or the real libnccl.so.2 in /usr/local/cuda; then the traces (read
here byte by byte, and through `commscope analyze --events`) checked against what the program
itself passed to NCCL.

Usage: test_nccl.py CASE [--np N]; CS_BIN, CS_LIB, CS_TESTBIN name the build's folders.
Exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE).
"""
import argparse
import collections
import csv
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile

BIN = os.environ.get("CS_BIN", "")
LIB = os.environ.get("CS_LIB", "")
TESTBIN = os.environ.get("CS_TESTBIN", "")
COLLECTOR = os.path.join(LIB, "libcommscope.so")

FLAG_NCCL_STATIC = 1 << 5
FLAG_NO_MPI = 1 << 6
EV_ERROR, EV_ROOT, EV_GROUPED, EV_IN_PROGRESS = 1, 1 << 3, 1 << 7, 1 << 10
RANKSRC_TORCH = 1

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


# ---- the trace format (docs/trace-format.md), read independently of the analyzer ----

HDR = struct.Struct("<8sIIIIIIiiiIQQQQQQQQQ")


SAMPLE_OPS = (210, 211, 212)  # resource samples (the collector's sampler thread), kept apart


def read_trace(path):
    """Header fields, events and communicator records of one trace file.  Resource samples
    (ops 210-212) are not events: they are in hdr["samples"], in recording order."""
    with open(path, "rb") as f:
        data = f.read()
    h = HDR.unpack_from(data, 0)
    hdr = {"version": h[1], "flags": h[5], "rank": h[7], "world": h[8], "run_id": h[11]}
    # Fields after note (offset 760): nccl_version, gpu_timing, rank_source, local_rank,
    # gpu_dropped, gpu_note.
    nv, gt, rs, lr, gd = struct.unpack_from("<IIIiQ", data, 760)
    hdr.update(nccl_version=nv, gpu_timing=gt, rank_source=rs, local_rank=lr, gpu_dropped=gd)
    hdr["gpu_note"] = data[784:784 + 256].split(b"\0")[0].decode()
    events, comms, samples = [], [], []
    hdr["samples"] = samples
    off = 4096
    while off + 64 <= len(data):
        magic, kind, thread, used, crc, span = struct.unpack_from("<IHHIII", data, off)
        if magic != 0x4b4c4243:
            off += 16384
            continue
        if kind == 1:
            for k in range(used):
                e = struct.unpack_from("<QQQQQQIiHHi", data, off + 64 + 64 * k)
                (samples if e[8] in SAMPLE_OPS else events).append(
                    dict(t_begin=e[0], t_end=e[1], comm=e[2], bytes=e[3], bytes_recv=e[4],
                         request=e[5], seq=e[6], peer=e[7], op=e[8], flags=e[9], aux=e[10]))
        elif kind == 2:
            pos = off + 64
            end = pos + used
            while pos < end:
                rb, ck, op, cid, parent, tc, size, my, color, key = struct.unpack_from(
                    "<IHHQQQiiii", data, pos)
                members = list(struct.unpack_from("<%di" % size, data, pos + 48))
                ext = None
                moff = (48 + 4 * size + 7) & ~7
                if rb >= moff + 32:
                    dev, _fl = struct.unpack_from("<iI", data, pos + moff)
                    ext = dev
                comms.append(dict(kind=ck, op=op, id=cid, parent=parent, size=size, my_rank=my,
                                  color=color, key=key, members=members, cuda_dev=ext))
                pos += rb
        off += 16384 * max(span, 1)
    return hdr, events, comms


def launch(prog, args, np_, rundir, extra_env=None, timeout=90):
    exch = tempfile.mkdtemp(prefix="x", dir=os.path.dirname(rundir))
    shm = tempfile.mkdtemp(prefix="shm", dir=os.path.dirname(rundir))
    procs = []
    for r in range(np_):
        env = dict(os.environ)
        env.update({"RANK": str(r), "WORLD_SIZE": str(np_), "LOCAL_RANK": str(r),
                    "LD_PRELOAD": COLLECTOR, "COMMSCOPE_DIR": rundir, "FAKE_NCCL_DIR": shm})
        env.update(extra_env or {})
        procs.append(subprocess.Popen([prog, exch] + args, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    out = []
    for r, p in enumerate(procs):
        so, se = p.communicate(timeout=timeout)
        out.append((p.returncode, so, se))
        if p.returncode != 0:
            print("rank %d exit %d\nstdout: %s\nstderr: %s" % (r, p.returncode, so, se),
                  file=sys.stderr)
    return out


def find_key(obj, key):
    """The value of `key` anywhere in a JSON document, or None."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            got = find_key(v, key)
            if got is not None:
                return got
    elif isinstance(obj, list):
        for v in obj:
            got = find_key(v, key)
            if got is not None:
                return got
    return None


def analyze(rundir, want_rc=0):
    ev = os.path.join(rundir, "events.csv")
    js = os.path.join(rundir, "report.json")
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", rundir, "--events", ev,
                        "--json", js], capture_output=True, text=True, timeout=60)
    check(p.returncode == want_rc, "commscope analyze exit %d (want %d): %s"
          % (p.returncode, want_rc, p.stderr[-2000:]))
    rows = list(csv.DictReader(open(ev))) if os.path.exists(ev) else []
    rep = json.load(open(js)) if os.path.exists(js) else {}
    rep["problems"] = find_key(rep, "problems") or []
    return rows, rep, p.stderr


def case_counts(np_):
    tmp = tempfile.mkdtemp(prefix="cs-nccl-")
    rundir = os.path.join(tmp, "run")
    iters = 3
    out = launch(os.path.join(TESTBIN, "cs_nccl_ranks"), [str(iters)], np_, rundir)
    if not check(all(rc == 0 for rc, _, _ in out), "every rank exits 0"):
        return
    expect = {}
    split = {}
    for r, (_, so, _) in enumerate(out):
        for line in so.splitlines():
            w = line.split()
            if w[0] == "expect":
                expect[(r, w[1])] = (int(w[2]), int(w[3]), int(w[4]))
            elif w[0] == "split":
                split[r] = (int(w[1]), int(w[2]), int(w[3]))
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    check(len(files) == np_, "%d trace files in the run directory, found %d" % (np_, len(files)))
    traces = {}
    for path in files:
        hdr, events, comms = read_trace(path)
        traces[hdr["rank"]] = (hdr, events, comms)
    check(len({t[0]["run_id"] for t in traces.values()}) == 1, "one run id over all ranks")
    for r, (hdr, events, comms) in traces.items():
        check(hdr["world"] == np_, "rank %d: world size %d" % (r, hdr["world"]))
        check(hdr["flags"] & FLAG_NO_MPI, "rank %d: NO_MPI flag set" % r)
        check(hdr["rank_source"] == RANKSRC_TORCH, "rank %d: rank from RANK (source %d)"
              % (r, hdr["rank_source"]))
        check(hdr["local_rank"] == r, "rank %d: local rank %d" % (r, hdr["local_rank"]))
        check(hdr["nccl_version"] == 22809, "rank %d: NCCL version %d recorded"
              % (r, hdr["nccl_version"]))

    # Exact calls and bytes per op and rank, from the analyzer's event listing.
    rows, rep, text = analyze(rundir)
    got = collections.defaultdict(lambda: [0, 0, 0])
    for row in rows:
        if row["op"].startswith("nccl"):
            g = got[(int(row["rank"]), row["op"])]
            g[0] += 1
            g[1] += int(row["bytes"])
            g[2] += int(row["bytes_recv"])
    for key, want in sorted(expect.items()):
        check(tuple(got.get(key, (0, 0, 0))) == want,
              "rank %d %s: calls/bytes/bytes_recv %s, program made %s"
              % (key[0], key[1], tuple(got.get(key, (0, 0, 0))), want))
    for key in got:
        if key[1] not in ("ncclCommInitRank", "ncclCommSplit", "ncclCommDestroy",
                          "ncclGetUniqueId"):
            check(key in expect, "rank %d: unexpected op %s" % key)
    check(sum(1 for row in rows if row["op"] == "ncclGetUniqueId") == 1,
          "one ncclGetUniqueId (rank 0)")
    # Per rank: NCCL collectives and send/recv are its communication calls and bytes.
    comm_ops = {"ncclAllReduce", "ncclBroadcast", "ncclBcast", "ncclReduce", "ncclAllGather",
                "ncclReduceScatter", "ncclAlltoAll", "ncclGather", "ncclScatter", "ncclSend",
                "ncclRecv"}
    ranks = {x["rank"]: x for x in rep.get("ranks", [])}
    for r in range(np_):
        want_calls = sum(v[0] for (kr, op), v in expect.items() if kr == r and op in comm_ops)
        want_bytes = sum(v[1] for (kr, op), v in expect.items() if kr == r and op in comm_ops)
        got_r = ranks.get(r, {})
        check(want_calls > 0 and got_r.get("calls") == want_calls,
              "rank %d: ranks[].calls %r, program made %d NCCL calls"
              % (r, got_r.get("calls"), want_calls))
        check(got_r.get("bytes") == want_bytes, "rank %d: ranks[].bytes %r, program sent %d"
              % (r, got_r.get("bytes"), want_bytes))

    # Groups: every grouped call carries its GroupEnd's launch id; GroupEnd counts them.
    for r, (hdr, events, comms) in traces.items():
        ends = {e["request"]: e for e in events if e["op"] == 145}
        grouped = collections.Counter(e["request"] for e in events
                                      if e["flags"] & EV_GROUPED)
        check(len(ends) == 2 * iters, "rank %d: %d group launches" % (r, len(ends)))
        for req, e in ends.items():
            check(grouped[req] == e["bytes_recv"] == 2,
                  "rank %d: group %d has %d grouped calls, GroupEnd says %d"
                  % (r, req, grouped[req], e["bytes_recv"]))
        check(set(grouped) <= set(ends), "rank %d: grouped calls belong to a GroupEnd" % r)
        single = [e["request"] for e in events if 128 <= e["op"] <= 138
                  and not e["flags"] & EV_GROUPED]
        check(len(single) == len(set(single)) and 0 not in single,
              "rank %d: every ungrouped call has its own launch id" % r)

    # Communicators: one world id on all ranks; split ids agreed within a color only; records.
    world_ids = set()
    split_ids = collections.defaultdict(set)
    for r, (hdr, events, comms) in traces.items():
        ncomm = [c for c in comms if c["kind"] == 2]
        check(len(ncomm) == 2, "rank %d: two NCCL communicator records, found %d"
              % (r, len(ncomm)))
        for c in ncomm:
            check(c["members"][c["my_rank"]] == r, "rank %d: own member entry" % r)
            check(all(m == -1 for i, m in enumerate(c["members"]) if i != c["my_rank"]),
                  "rank %d: other members unknown (-1)" % r)
            check(c["cuda_dev"] == r, "rank %d: CUDA device %s recorded" % (r, c["cuda_dev"]))
            if c["op"] == 147:
                world_ids.add(c["id"])
                check(c["size"] == np_ and c["my_rank"] == r, "rank %d: world record" % r)
            elif c["op"] == 151:
                color, hn, hr = split[r]
                split_ids[color].add(c["id"])
                check(c["size"] == hn and c["my_rank"] == hr and c["color"] == color
                      and c["key"] == -r,
                      "rank %d: split record size %d rank %d color %d key %d, NCCL says %d %d"
                      % (r, c["size"], c["my_rank"], c["color"], c["key"], hn, hr))
                check(c["parent"] in world_ids or True, "parent recorded")
        for e in events:
            if e["op"] == 128 and not e["flags"] & EV_GROUPED:
                check(e["comm"] != 0, "rank %d: all-reduce with a communicator id" % r)
    check(len(world_ids) == 1, "all ranks agree on the world id: %s" % world_ids)
    check(all(len(v) == 1 for v in split_ids.values()) and
          len({next(iter(v)) for v in split_ids.values()}) == len(split_ids),
          "each split half has one id, different from the other half: %s" % dict(split_ids))
    # The analyzer rebuilt the memberships from the records of all members.
    check(not rep["problems"], "no analyzer problems: %s" % rep["problems"])
    nccl_ops = {o["op"]: o for o in rep.get("ops", []) if o["op"].startswith("nccl")}
    check("ncclAllReduce" in nccl_ops, "report lists ncclAllReduce: %s" % list(nccl_ops))
    for o in rep.get("ops", []):
        if o["op"] == "ncclAllReduce" and o.get("comm_size") == np_:
            want = sum(v[0] for (r, op), v in expect.items() if op == "ncclAllReduce") - 3 * np_
            check(o["calls"] == want, "report: world all-reduce calls %d, want %d"
                  % (o["calls"], want))
        if o["op"] == "ncclAllReduce" and o.get("comm_size") == np_ // 2:
            check(o["calls"] == 3 * np_ // 2, "report: half all-reduce calls %d" % o["calls"])


def case_static():
    tmp = tempfile.mkdtemp(prefix="cs-nccl-static-")
    rundir = os.path.join(tmp, "run")
    out = launch(os.path.join(TESTBIN, "cs_nccl_static"), ["1"], 2, rundir)
    check(all(rc == 0 for rc, _, _ in out), "the statically linked program runs unchanged")
    for r, (rc, so, se) in enumerate(out):
        check(se.count("statically") == 1, "rank %d says once that NCCL is static: %r" % (r, se))
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    check(len(files) == 2, "a trace per rank even though no NCCL call was intercepted")
    for path in files:
        hdr, events, comms = read_trace(path)
        check(hdr["flags"] & FLAG_NCCL_STATIC, "%s: NCCL_STATIC flag" % path)
        check("NOT recorded" in hdr["gpu_note"], "%s: note says %r" % (path, hdr["gpu_note"]))
        check(not [e for e in events if 128 <= e["op"] <= 156],
              "%s: no NCCL events (the calls never reached the wrappers)" % path)
    rows, rep, text = analyze(rundir, want_rc=1)
    probs = " ".join(rep.get("problems", []))
    check("statically" in probs and "NOT recorded" in probs,
          "report problems say NCCL was not recorded: %r" % probs)
    check("statically" in text, "commscope analyze says NCCL was not recorded")


REAL_PROBE = r"""
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1], mode=os.RTLD_GLOBAL)
g = ctypes.CDLL(None) if sys.argv[2] == "global" else lib
v = ctypes.c_int(0)
rv = g.ncclGetVersion(ctypes.byref(v))
uid = ctypes.create_string_buffer(128)
ru = g.ncclGetUniqueId(uid)
comm = ctypes.c_void_p(0)
ri = g.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0) if ru == 0 else -1
print(rv, v.value, ru, ri)
"""


def case_real_library():
    libs = [p for p in ("/usr/local/cuda/lib/libnccl.so.2", "/usr/local/cuda/lib64/libnccl.so.2")
            if os.path.exists(p)]
    if not libs:
        print("SKIP: no /usr/local/cuda/lib*/libnccl.so.2")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="cs-nccl-real-")
    rundir = os.path.join(tmp, "run")
    probe = os.path.join(tmp, "probe.py")
    with open(probe, "w") as f:
        f.write(REAL_PROBE)
    env = dict(os.environ, RANK="0", WORLD_SIZE="1", COMMSCOPE_DIR=rundir)
    direct = subprocess.run([sys.executable, probe, libs[0], "direct"], env=env,
                            capture_output=True, text=True, timeout=120)
    env["LD_PRELOAD"] = COLLECTOR
    traced = subprocess.run([sys.executable, probe, libs[0], "global"], env=env,
                            capture_output=True, text=True, timeout=120)
    check(direct.returncode == 0 and traced.returncode == 0,
          "probes ran: %s / %s" % (direct.stderr[-800:], traced.stderr[-800:]))
    d, t = direct.stdout.split(), traced.stdout.split()
    print("real NCCL, direct: version rc/value, uniqueid rc, initrank rc =", d)
    print("real NCCL, traced:", t)
    check(d == t, "the traced program sees exactly what NCCL returns: %s vs %s" % (d, t))
    check(len(t) == 4 and t[0] == "0" and int(t[1]) >= 22800, "ncclGetVersion passes through")
    check(len(t) == 4 and t[3] != "0", "ncclCommInitRank fails without a GPU")
    files = glob.glob(os.path.join(rundir, "rank-*.cst"))
    if check(len(files) == 1, "a trace was written: %s" % files):
        hdr, events, comms = read_trace(files[0])
        ops = [e["op"] for e in events]
        check(146 in ops and 147 in ops, "GetUniqueId and CommInitRank recorded: %s" % ops)
        check(hdr["nccl_version"] == int(d[1]), "NCCL version %d in the header"
              % hdr["nccl_version"])
        for e in events:
            if e["op"] == 147:
                check(e["flags"] & EV_ERROR and e["aux"] == int(d[3]),
                      "CommInitRank event carries NCCL's error %s: flags %d aux %d"
                      % (d[3], e["flags"], e["aux"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--np", type=int, default=4)
    a = ap.parse_args()
    if not os.path.exists(COLLECTOR):
        print("no collector at", COLLECTOR)
        return 1
    {"counts": lambda: case_counts(a.np), "static": case_static,
     "real_library": case_real_library}[a.case]()
    if failures:
        print("%d failed checks" % len(failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
