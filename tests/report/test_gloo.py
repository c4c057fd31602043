#!/usr/bin/env python3
"""A real gloo job (Debian's PyTorch, CPU only) profiled and imported: the pre-Kineto format (a
bare JSON array) read, gloo:* collectives counted as communication and matched across ranks.

Usage: test_gloo.py; CS_BIN names the build's bin/ folder.  Runs tests/report/gloo_train.py
under torchrun (torch.distributed.run) with 2 ranks; exit 77 without a torch that has it.
Expected numbers come from the trace files themselves (json module, exact microseconds).
"""
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import test_reports  # noqa: E402
from test_reports import check, failures  # noqa: E402

BIN = os.environ.get("CS_BIN", "")


def torch_python():
    for py in ("/usr/bin/python3", sys.executable):
        if os.path.exists(py) and subprocess.run(
                [py, "-c", "import torch.distributed.run"], capture_output=True).returncode == 0:
            return py
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_job(py, out, logs):
    """One torchrun attempt, its process group killed after 120 s (the job takes about 10)."""
    # Debian 12's torch 1.13 on Python 3.11 fails on torchrun's default "--redirects 0".
    cmd = [py, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_port=%d" % free_port(), "--redirects", "1", "--tee", "1", "--log_dir", logs,
           os.path.join(HERE, "gloo_train.py"), out]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        so, se = p.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        so, se = p.communicate()
        se += "\n(killed after 120 s)\n" + rank_logs(logs)
    return subprocess.CompletedProcess(cmd, p.returncode, so, se)


def rank_logs(logs):
    """The ranks' own output, as torchrun kept it under --log_dir."""
    text = []
    for root, _, names in os.walk(logs):
        for n in sorted(names):
            with open(os.path.join(root, n), errors="replace") as f:
                text.append("%s:\n%s" % (os.path.join(root, n), f.read()[-1000:]))
    return "\n".join(text)


def spans(path):
    """(legacy format?, [(ts, dur) of gloo:all_reduce], other gloo collective spans)."""
    with open(path) as f:
        doc = json.load(f)
    legacy = isinstance(doc, list)
    evs = doc if legacy else doc["traceEvents"]
    ar = [(e["ts"], e["dur"]) for e in evs
          if isinstance(e, dict) and e.get("ph") == "X" and e.get("name") == "gloo:all_reduce"]
    other = [e for e in evs if isinstance(e, dict) and e.get("ph") == "X" and
             str(e.get("name", "")).startswith("gloo:") and e["name"] != "gloo:all_reduce"]
    return legacy, ar, other


def main():
    py = torch_python()
    if not py:
        print("skipped: no PyTorch with torch.distributed (install python3-torch)",
              file=sys.stderr)
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "traces")
        os.mkdir(out)
        files = [os.path.join(out, "trace_rank%d.json" % r) for r in range(2)]
        p = None
        for attempt in range(2):
            p = run_job(py, out, os.path.join(tmp, "log%d" % attempt))
            if p.returncode == 0 and all(map(os.path.exists, files)):
                break
            # The job runs without commscope: a failed or stalled start (rendezvous, a port
            # taken) is torch's, so it is tried once more on a fresh port, and said so.
            print("torchrun attempt %d: status %d\n%s" % (attempt, p.returncode, p.stderr[-3000:]),
                  file=sys.stderr)
        if not check(p.returncode == 0 and all(map(os.path.exists, files)),
                     "torchrun gloo job: %d %s" % (p.returncode, p.stderr[-1500:])):
            return 1
        ind = [spans(f) for f in files]
        js = os.path.join(tmp, "r.json")
        a = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto"] +
                           files + ["--json", js], capture_output=True, text=True, timeout=120)
        if not check(a.returncode in (0, 1) and os.path.exists(js),
                     "analyze %d %s" % (a.returncode, a.stderr[-1500:])):
            return 1
        with open(js) as f:
            rep = json.load(f)
        n = [len(x[1]) for x in ind]
        # 3 profiled steps, each with DDP's gradient all-reduce and the explicit one
        check(n[0] == n[1] and n[0] >= 6, "gloo:all_reduce spans per rank %s" % n)
        for r, (legacy, ar, other) in enumerate(ind):
            kr = [k for k in rep["kineto"]["ranks"] if k["rank"] == r]
            if check(len(kr) == 1, "kineto rank %d" % r):
                check(kr[0]["gloo_collectives"] == len(ar) + len(other),
                      "rank %d gloo_collectives %r vs %d" % (r, kr[0]["gloo_collectives"],
                                                              len(ar) + len(other)))
                check(kr[0]["legacy_format"] == legacy, "rank %d legacy %r" % (r, legacy))
                check(kr[0]["kernels"] == 0 and kr[0]["nccl_kernels"] == 0, "no GPU records")
        ops = [o for o in rep["ops"] if o["op"] == "gloo:all_reduce"]
        if check(len(ops) == 1, "one gloo:all_reduce row %r" % rep["ops"]):
            o = ops[0]
            check(o["calls"] == sum(n) and o["comm_size"] == 2, "calls %r" % o)
            us = sum(d for x in ind for _, d in x[1])
            check(abs(o["time_s"] - us / 1e6) <= 1e-9 * max(1, us / 1e6),
                  "time_s %r vs %d us" % (o["time_s"], us))
        inst = rep["instances"]
        check(inst["matched"] == n[0] + len(ind[0][2]) and inst["incomplete"] == 0,
              "instances %r" % inst)
        g = rep["groups"]
        check(len(g) == 1 and g[0]["role"] == "dp" and g[0]["ranks"] == [0, 1], "groups %r" % g)
        check(rep["gradient_sync"]["share"] is not None and rep["gradient_sync"]["share"] > 0,
              "grad sync share %r" % rep["gradient_sync"])
        check("gloo=%d" % n[0] in a.stdout, "text shows gloo=%d" % n[0])
        # a bare array without events is refused with a message naming the format
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            f.write("[1, 2, 3]\n")
        b = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto", bad],
                           capture_output=True, text=True, timeout=60)
        check(b.returncode not in (0, 1) and b.returncode > 0 and
              "bad.json: not a PyTorch profiler trace: a JSON array without trace events"
              in b.stderr, "bare array of numbers: %d %r" % (b.returncode, b.stderr))
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
