#!/usr/bin/env python3
"""The NCCL sweep of `commscope fabric` (label mpi), without a GPU: the benchmark loads the CPU
NCCL and CUDA runtime TEST DOUBLES (tests/fakes) with dlopen, as it would load the real ones.

usage: test_fabric_nccl.py COMMSCOPE FAKES_LIBDIR CASE
  sweep    3 ranks on 2 simulated GPUs: devices 0,1,0 (local rank mod device count); the calls
           the double logged (FAKE_NCCL_LOG) are, rank by rank and in order, exactly the sweep's
           (op, byte count, peer, warm-up + iterations) computed here from the documented rules;
           every NCCL and MPI entry's algbw is bytes/time and busbw algbw x the nccl-tests factor.
  nolib    libnccl cannot be loaded: said once in the text and in JSON, MPI sweep complete.
  nogpu    the runtime has no device (cudaErrorNoDevice): the same.
  off      --nccl off: not tried, the same.
  error    --max-bytes 2M: the double refuses more than 1 MiB per rank and call
           (ncclInvalidArgument), so the NCCL sweep stops at the first all-reduce of 2 MiB on
           every rank, says so once, keeps the sizes before; the MPI sweep is complete."""
import json
import os
import subprocess
import sys
import tempfile

commscope, fakes, case = sys.argv[1], sys.argv[2], sys.argv[3]
NP = 3
failures = 0
OPS = ["allreduce", "allgather", "reducescatter", "alltoall", "sendrecv"]
FACTOR = {"allreduce": 2 * (NP - 1) / NP, "allgather": (NP - 1) / NP,
          "reducescatter": (NP - 1) / NP, "alltoall": (NP - 1) / NP, "sendrecv": 1.0}


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def sizes(op, max_bytes):
    """Sizes the sweep moves for op (docs/topology.md): 8 B doubling to max, whole floats
    (per rank for the split ops), 0 skipped."""
    out, b = [], 8
    while b <= max_bytes:
        s = b // NP // 4 * 4 * NP if op in ("allgather", "reducescatter", "alltoall") else b // 4 * 4
        if s:
            out.append(s)
        b *= 2
    return out


def iters(size):
    return 20 if size <= 65536 else 5 if size <= (4 << 20) else 2


def expected_calls(rank, max_bytes):
    """The (name, bytes, peer) calls rank makes, in order: warm-up + iterations per size."""
    calls = []
    for op in OPS:
        for s in sizes(op, max_bytes):
            per = s // NP
            one = {"allreduce": [("AllReduce", s, -1)],
                   "allgather": [("AllGather", per, -1)],
                   "reducescatter": [("ReduceScatter", per, -1)],
                   "alltoall": [c for p in range(NP) for c in (("Send", per, p), ("Recv", per, p))],
                   "sendrecv": [("Send", s, (rank + 1) % NP), ("Recv", s, (rank - 1) % NP)]}[op]
            calls += one * (1 + iters(s))
    return calls


def check_bw(doc):
    for c in doc["collectives"]:
        alg = c["bytes"] * 8 / c["time_us"] / 1e3
        check(abs(c["algbw_gbps"] - alg) <= 1e-4 * alg, f"algbw = bytes/time: {c}")
        bus = c["algbw_gbps"] * FACTOR[c["op"]]
        check(abs(c["busbw_gbps"] - bus) <= 1e-4 * bus, f"busbw = algbw x factor: {c}")


def run(tmp, env_extra, extra_args=(), max_bytes="64K"):
    out = os.path.join(tmp, "fabric.json")
    env = dict(os.environ, LD_LIBRARY_PATH=fakes, FAKE_NCCL_DIR=tmp, **env_extra)
    cmd = [commscope, "fabric", "--max-bytes", max_bytes, "--json", out, *extra_args, "--",
           "mpirun", "--oversubscribe", "-np", str(NP)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    check(r.returncode == 0, f"exit status {r.returncode}")
    return r.stdout, json.load(open(out))


def check_mpi_complete(doc, max_bytes=65536):
    mpi = [c for c in doc["collectives"] if c["transport"] == "mpi"]
    check(sorted({c["op"] for c in mpi}) == sorted(OPS), "every MPI op measured")
    for op in OPS:
        got = [c["bytes"] for c in mpi if c["op"] == op]
        check(got == sizes(op, max_bytes), f"MPI {op} sizes {got}")


def check_absent(text, doc, why):
    nccl = doc["nccl"]
    check(nccl is not None and nccl["available"] is False, f"nccl not available: {nccl}")
    check(nccl and why in (nccl["reason"] or ""), f"reason names the cause ({why!r}): {nccl}")
    check(text.count("NCCL: not measured") == 1 and text.count(why) == 1,
          "the text says it once")
    check(not [c for c in doc["collectives"] if c["transport"] == "nccl"], "no NCCL results")
    check_mpi_complete(doc)
    check_bw(doc)


with tempfile.TemporaryDirectory() as tmp:
    if case == "sweep":
        log = os.path.join(tmp, "nccl.log")
        text, doc = run(tmp, {"FAKE_CUDA_DEVICES": "2", "FAKE_NCCL_LOG": log})
        nccl = doc["nccl"]
        check(nccl and nccl["available"] is True, f"nccl available: {nccl}")
        check(nccl and nccl["devices"] == [r % 2 for r in range(NP)],
              f"device = local rank mod 2: {nccl}")
        check("NCCL: not measured" not in text and "NCCL 2." in text, "text names NCCL's version")
        got = [c for c in doc["collectives"] if c["transport"] == "nccl"]
        for op in OPS:
            check([c["bytes"] for c in got if c["op"] == op] == sizes(op, 65536),
                  f"NCCL {op} sizes: {[c['bytes'] for c in got if c['op'] == op]}")
        check_mpi_complete(doc)
        check_bw(doc)
        per_rank = {r: [] for r in range(NP)}
        for line in open(log):
            f = line.split()
            check(f[0] == "call" and int(f[5]) == NP and int(f[9]) == 7,
                  f"float calls on a {NP}-rank communicator: {line!r}")
            per_rank[int(f[3])].append((f[1], int(f[11]), int(f[13])))
        for r in range(NP):
            want = expected_calls(r, 65536)
            have = per_rank[r]
            check(have == want, f"rank {r}: {len(have)} calls logged, {len(want)} expected; "
                  f"first difference at {next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))}")
    elif case == "nolib":
        text, doc = run(tmp, {"FAKE_CUDA_DEVICES": "2",
                              "COMMSCOPE_NCCL_LIB": "/nonexistent/libnccl.so.2"})
        check_absent(text, doc, "cannot load /nonexistent/libnccl.so.2")
    elif case == "nogpu":
        text, doc = run(tmp, {"FAKE_CUDA_DEVICES": "0"})
        check_absent(text, doc, "no GPU: cudaGetDeviceCount failed with CUDA error 100")
    elif case == "off":
        text, doc = run(tmp, {"FAKE_CUDA_DEVICES": "2"}, ["--nccl", "off"])
        check_absent(text, doc, "not tried (--nccl off)")
    elif case == "error":
        text, doc = run(tmp, {"FAKE_CUDA_DEVICES": "2"}, max_bytes="2M")
        nccl = doc["nccl"]
        why = "rank 0: allreduce of 2097152 bytes failed with NCCL error 4"
        check(nccl and nccl["available"] is True and nccl["stopped"] is True and
              why in (nccl["reason"] or ""), f"stopped at the first refused call: {nccl}")
        check(text.count("STOPPED: ") == 1 and text.count(why) == 1, "the text says it once")
        got = [c for c in doc["collectives"] if c["transport"] == "nccl"]
        check([c["op"] for c in got] == ["allreduce"] * len(got) and
              [c["bytes"] for c in got] == sizes("allreduce", 1 << 20),
              f"NCCL all-reduce up to 1 MiB kept, nothing after: {[c['bytes'] for c in got]}")
        check_mpi_complete(doc, 2 << 20)
        check_bw(doc)
    else:
        sys.exit(f"unknown case {case}")

sys.exit(1 if failures else 0)
