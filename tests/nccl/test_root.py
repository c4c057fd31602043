#!/usr/bin/env python3
"""The root service of `commscope run` for jobs without MPI (include/commscope/root.h,
docs/nccl.md "Jobs without MPI"): 4 ranks of cs_nccl_ranks on the CPU NCCL test double, started
by the torchrun test double (or the real torchrun) under `commscope run --root 127.0.0.1:PORT`,
each writing its trace into a directory of its own (COMMSCOPE_LOCAL_DIR=.../local/%r), never into
the run directory.

  gather       every trace arrives in the run directory through the service; all ranks analysed
               with exact call counts; rank 2's clock is 7 s ahead (COMMSCOPE_TEST_CLOCK_SKEW) and
               its host's CLOCK_REALTIME 3 s behind (COMMSCOPE_TEST_REALTIME_SKEW), so only the
               ping-pong against the service can align it: every world all-reduce must overlap on
               all ranks after alignment (max entry <= min exit + 1 ms)
  unreachable  COMMSCOPE_ROOT names a closed port, and then a port that accepts but never
               answers: one warning per rank, the program's results and exit unchanged, traces in
               the local directories, analysable once put together
  vanished     the service answers at start and is gone at exit: one warning per rank, closed
               traces kept locally with the start clock sample only, analysable
  kill         rank 1 dies by SIGKILL at the end: its unclosed trace is copied from its local
               directory by the service, and its calls are all counted
  garbage      foreign clients (HTTP, a hello of another protocol version, a short hello) are
               refused with a specific message; the job's own traces still all arrive
  master       the ranks find the service from MASTER_ADDR and MASTER_PORT + 1 alone
  slurm        the real srun on a private one-node Slurm started here (root and Slurm only)
  torchrun     the real torchrun (python3-torch) with --no_python (torch 1.13 spells it so;
               later versions take --no-python too), skipped without it

Usage: test_root.py CASE; CS_BIN, CS_LIB, CS_TESTBIN from ctest.  Exit 0 pass, 1 fail, 77 skip.
"""
import collections
import csv
import glob
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nccl as T  # noqa: E402
import test_launch as L  # noqa: E402

COMMSCOPE = os.path.join(T.BIN, "commscope")
PROG = os.path.join(T.TESTBIN, "cs_nccl_ranks")
NP = 4
ITERS = 3
FLAG_PARTIAL = 1
FLAG_CLOCK_ROOT = 1 << 7
SKEW_RANK = 2
SKEW_NS = 7_000_000_000
REALTIME_SKEW_NS = -3_000_000_000
# Alignment bound: on one host the ping-pong's round trip is tens of µs; 1 ms leaves room for
# a loaded machine and is still 7000 times smaller than the injected offset.
BOUND_NS = 1_000_000


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def clock_samples(path):
    with open(path, "rb") as f:
        data = f.read(4096)
    out = []
    for off in (120, 152):
        local, offset, rtt, rounds, valid = struct.unpack_from("<QqQII", data, off)
        out.append(dict(local=local, offset=offset, rtt=rtt, rounds=rounds, valid=valid))
    return out


def expected_totals(stdout):
    """Per-op (calls, bytes, bytes_recv) summed over every rank's "expect" lines."""
    tot = collections.defaultdict(lambda: [0, 0, 0])
    for line in stdout.splitlines():
        if line.startswith("[") and "]:" in line:
            line = line.split("]:", 1)[1]  # torchrun --tee prefixes "[default3]:"
        w = line.split()
        if w and w[0] == "expect":
            for i in range(3):
                tot[w[1]][i] += int(w[2 + i])
    return {k: tuple(v) for k, v in tot.items()}


def analysed_totals(rows):
    tot = collections.defaultdict(lambda: [0, 0, 0])
    for row in rows:
        if row["op"].startswith("nccl"):
            g = tot[row["op"]]
            g[0] += 1
            g[1] += int(row["bytes"])
            g[2] += int(row["bytes_recv"])
    return {k: tuple(v) for k, v in tot.items()}


def check_counts(stdout, rows, ranks_expected):
    want = expected_totals(stdout)
    got = analysed_totals(rows)
    T.check(want, "the ranks printed what they did")
    for op, w in sorted(want.items()):
        T.check(got.get(op) == w, "%s: analysed calls/bytes/bytes_recv %s, the ranks made %s"
                % (op, got.get(op), w))
    per_rank = collections.Counter(int(r["rank"]) for r in rows if r["op"] == "ncclAllReduce")
    for r in ranks_expected:
        # Per rank: ITERS x 3 world all-reduces + 3 on the split communicator.
        T.check(per_rank[r] == ITERS * 3 + 3, "rank %d: %d all-reduces analysed, it made %d"
                % (r, per_rank[r], ITERS * 3 + 3))


def check_alignment(rows):
    """Every world all-reduce (not grouped) overlaps on all ranks once aligned."""
    inst = collections.defaultdict(list)
    for row in rows:
        if row["op"] == "ncclAllReduce" and not int(row["flags"]) & 128:
            inst[(row["comm"], row["seq"])].append((int(row["t_begin_ns"]), int(row["t_end_ns"])))
    world = [v for v in inst.values() if len(v) == NP]
    T.check(len(world) == ITERS, "%d ungrouped world all-reduces found, want %d"
            % (len(world), ITERS))
    worst = max((max(b for b, _ in v) - min(e for _, e in v)) for v in world) if world else None
    print("alignment: worst (latest entry - earliest exit) over world all-reduces = %s ns"
          % worst)
    T.check(worst is not None and worst <= BOUND_NS,
            "aligned all-reduces overlap on all ranks within %d ns (worst %s ns)"
            % (BOUND_NS, worst))


def run_job(tmp, port, extra_env=None, program=None, torchrun=None):
    """commscope run --root 127.0.0.1:PORT -- torchrun ... cs_nccl_ranks."""
    exch = os.path.join(tmp, "x")
    os.makedirs(exch, exist_ok=True)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("COMMSCOPE_ROOT", None)
    env["FAKE_NCCL_DIR"] = tmp
    env["COMMSCOPE_LOCAL_DIR"] = os.path.join(tmp, "local", "%r")
    if torchrun is None:
        env["PATH"] = L.launcher_dir(tmp) + ":" + env.get("PATH", "")
    env.update(extra_env or {})
    rundir = os.path.join(tmp, "run")
    if program is None:
        if torchrun is None:
            program = ["torchrun", "--nproc-per-node", str(NP), PROG, exch, str(ITERS)]
        else:
            program = torchrun + [PROG, exch, str(ITERS)]
    p = subprocess.run([COMMSCOPE, "run", "-o", rundir, "--quiet", "--root",
                        "127.0.0.1:%d" % port, "--"] + program,
                       env=env, capture_output=True, text=True, timeout=150)
    runfile = open(os.path.join(rundir, "commscope-run.txt")).read() \
        if os.path.exists(os.path.join(rundir, "commscope-run.txt")) else ""
    return p, rundir, runfile


def analyze(rundir, want_rc):
    return T.analyze(rundir, want_rc=want_rc)


def check_arrived(tmp, rundir, flags_want=FLAG_CLOCK_ROOT):
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    T.check(len(files) == NP, "%d traces in the run directory, found %d" % (NP, len(files)))
    for r in range(NP):
        local = os.path.join(tmp, "local", str(r), "rank-%05d.cst" % r)
        got = os.path.join(rundir, "rank-%05d.cst" % r)
        if not T.check(os.path.exists(local) and os.path.exists(got),
                       "rank %d wrote %s and it is in the run directory" % (r, local)):
            continue
        T.check(open(local, "rb").read() == open(got, "rb").read(),
                "rank %d: the run directory holds exactly its local file" % r)
        hdr = T.read_trace(got)[0]
        T.check(hdr["flags"] & flags_want == flags_want,
                "rank %d: header flags %#x include %#x" % (r, hdr["flags"], flags_want))
        s = clock_samples(got)
        T.check(s[0]["valid"] == 1 and s[0]["rounds"] == 16,
                "rank %d: clock sample 0 from 16 rounds against the service: %s" % (r, s[0]))


def case_gather():
    tmp = tempfile.mkdtemp(prefix="cs-root-")
    env = {"COMMSCOPE_TEST_CLOCK_SKEW": "%d:%d:0" % (SKEW_RANK, SKEW_NS),
           "COMMSCOPE_TEST_REALTIME_SKEW": "%d:%d" % (SKEW_RANK, REALTIME_SKEW_NS)}
    p, rundir, runfile = run_job(tmp, free_port(), env)
    T.check(p.returncode == 0, "commscope run exits 0 (%d): %s" % (p.returncode, p.stderr[-2000:]))
    T.check("root service" not in p.stderr and "commscope[" not in p.stderr,
            "no warnings: %r" % p.stderr[-1500:])
    T.check("%d trace(s) received" % NP in runfile and "0 missing" in runfile,
            "run file: %r" % [l for l in runfile.splitlines() if "root" in l])
    check_arrived(tmp, rundir)
    for r in range(NP):
        s = clock_samples(os.path.join(rundir, "rank-%05d.cst" % r))
        T.check(s[1]["valid"] == 1 and s[1]["rounds"] == 16,
                "rank %d: clock sample 1 against the service: %s" % (r, s[1]))
    rows, rep, _ = analyze(rundir, 0)
    T.check(sorted(x["rank"] for x in rep.get("ranks", [])) == list(range(NP)),
            "the analysis sees ranks 0..%d" % (NP - 1))
    check_counts(p.stdout, rows, range(NP))
    check_alignment(rows)


def case_unreachable():
    # A closed port: connection refused at once.
    port = free_port()
    for variant in ("refused", "silent"):
        tmp = tempfile.mkdtemp(prefix="cs-root-un-")
        listener = None
        env = {"COMMSCOPE_ROOT": "127.0.0.1:%d" % port,
               "COMMSCOPE_LOCAL_DIR": os.path.join(tmp, "local", "%r")}
        if variant == "silent":
            # Accepts connections (the kernel's backlog) and never says a word.
            listener = socket.socket()
            listener.bind(("127.0.0.1", 0))
            listener.listen(16)
            env["COMMSCOPE_ROOT"] = "127.0.0.1:%d" % listener.getsockname()[1]
            env["COMMSCOPE_ROOT_TIMEOUT_MS"] = "300"
        rundir = os.path.join(tmp, "run")
        out = T.launch(PROG, [str(ITERS)], NP, rundir, extra_env=env)
        if listener:
            listener.close()
        T.check(all(rc == 0 for rc, _, _ in out), "%s: every rank exits 0" % variant)
        for r, (_, so, se) in enumerate(out):
            warn = [l for l in se.splitlines() if "root service" in l]
            T.check(len(warn) == 1 and "unreachable" in warn[0] and "stays at" in warn[0],
                    "%s: rank %d warns once that the service is unreachable: %r"
                    % (variant, r, se[-800:]))
            T.check("wrong collective results" not in se, "%s: rank %d results unchanged"
                    % (variant, r))
        T.check(not glob.glob(os.path.join(rundir, "rank-*.cst")),
                "%s: nothing in the run directory (no service brought anything)" % variant)
        # The traces stay local; put together in one directory they are analysable.
        shared = os.path.join(tmp, "shared")
        os.makedirs(shared)
        for r in range(NP):
            f = os.path.join(tmp, "local", str(r), "rank-%05d.cst" % r)
            if T.check(os.path.exists(f), "%s: rank %d's trace at %s" % (variant, r, f)):
                hdr = T.read_trace(f)[0]
                T.check(not hdr["flags"] & FLAG_CLOCK_ROOT and not hdr["flags"] & FLAG_PARTIAL,
                        "%s: rank %d closed, aligned through CLOCK_REALTIME" % (variant, r))
                shutil.copy(f, shared)
        rows, rep, _ = analyze(shared, 0)
        T.check(sorted(x["rank"] for x in rep.get("ranks", [])) == list(range(NP)),
                "%s: the analysis sees every rank" % variant)
        check_counts("".join(so for _, so, _ in out), rows, range(NP))


def start_only_service(nranks):
    """A stand-in root service in a thread that serves the START sessions of nranks ranks (4
    clock rounds against its CLOCK_REALTIME) and then goes away: the ranks' exit sessions find
    nothing.  Returns (port, thread)."""
    import threading
    import time
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)

    def serve():
        for _ in range(nranks):
            c, _ = lsock.accept()
            hello = b""
            while len(hello) < 1152:
                hello += c.recv(1152 - len(hello))
            c.sendall(b"CSROOTOK" + struct.pack("<II", 0, 4) + bytes(240))
            for _ in range(4):
                ping = b""
                while len(ping) < 8:
                    ping += c.recv(8 - len(ping))
                c.sendall(struct.pack("<Q", time.clock_gettime_ns(time.CLOCK_REALTIME)))
            c.close()
        lsock.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return lsock.getsockname()[1], t


def case_vanished():
    """The service answers at start and is gone at exit: each rank warns once, keeps its closed
    trace locally with the start sample only (aligned through the service, no drift), and the
    traces put together are analysable."""
    tmp = tempfile.mkdtemp(prefix="cs-root-gone-")
    port, t = start_only_service(NP)
    env = {"COMMSCOPE_ROOT": "127.0.0.1:%d" % port,
           "COMMSCOPE_LOCAL_DIR": os.path.join(tmp, "local", "%r")}
    rundir = os.path.join(tmp, "run")
    out = T.launch(PROG, [str(ITERS)], NP, rundir, extra_env=env)
    t.join(timeout=30)
    T.check(all(rc == 0 for rc, _, _ in out), "every rank exits 0")
    shared = os.path.join(tmp, "shared")
    os.makedirs(shared)
    for r, (_, so, se) in enumerate(out):
        warn = [l for l in se.splitlines() if "root service" in l]
        T.check(len(warn) == 1 and "at exit" in warn[0] and "stays at" in warn[0],
                "rank %d warns once that it could not hand its trace over: %r" % (r, se[-800:]))
        f = os.path.join(tmp, "local", str(r), "rank-%05d.cst" % r)
        if T.check(os.path.exists(f), "rank %d's trace at %s" % (r, f)):
            hdr = T.read_trace(f)[0]
            s = clock_samples(f)
            T.check(hdr["flags"] & FLAG_CLOCK_ROOT and not hdr["flags"] & FLAG_PARTIAL,
                    "rank %d: closed, aligned through the service" % r)
            T.check(s[0]["valid"] == 1 and s[0]["rounds"] == 4 and s[1]["valid"] == 0,
                    "rank %d: start sample from the service's 4 rounds, no exit sample: %s"
                    % (r, s))
            shutil.copy(f, shared)
    rows, rep, _ = analyze(shared, 0)
    T.check(sorted(x["rank"] for x in rep.get("ranks", [])) == list(range(NP)),
            "the analysis sees every rank")
    check_counts("".join(so for _, so, _ in out), rows, range(NP))
    check_alignment(rows)


def case_kill():
    tmp = tempfile.mkdtemp(prefix="cs-root-kill-")
    p, rundir, runfile = run_job(tmp, free_port(), {"CS_TEST_KILL_RANK": "1"})
    T.check(p.returncode != 0, "the job fails (a rank was killed): %d" % p.returncode)
    T.check("rank 1 did not hand its trace over" in p.stderr and "copied it from" in p.stderr,
            "the service says it recovered rank 1: %r" % p.stderr[-1500:])
    T.check("3 trace(s) received" in runfile and "1 recovered" in runfile,
            "run file: %r" % [l for l in runfile.splitlines() if "root" in l])
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    T.check(len(files) == NP, "%d traces in the run directory, found %d" % (NP, len(files)))
    if os.path.exists(os.path.join(rundir, "rank-00001.cst")):
        hdr = T.read_trace(os.path.join(rundir, "rank-00001.cst"))[0]
        T.check(hdr["flags"] & FLAG_PARTIAL, "rank 1's trace is partial (never closed)")
    rows, rep, _ = analyze(rundir, 4)  # 4: a rank ended before finalizing (killed)
    T.check(sorted(x["rank"] for x in rep.get("ranks", [])) == list(range(NP)),
            "the analysis sees every rank, the killed one included")
    check_counts(p.stdout, rows, range(NP))


GARBAGE = r"""
import socket, struct, sys
port = int(sys.argv[1])
def talk(payload):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(payload)
    try:
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # the service may have answered and closed already
    data = b""
    while len(data) < 256:
        chunk = s.recv(256 - len(data))
        if not chunk:
            break
        data += chunk
    s.close()
    print(data[:8].decode("latin-1"), data[16:].split(b"\0")[0].decode())
talk(b"GET / HTTP/1.0\r\n\r\n")
hello = b"CSROOT\0\1" + struct.pack("<IIiiQiI", 99, 1, 0, 4, 1, 1, 0) + bytes(64 + 1048)
talk(hello)
talk(b"CSROOT\0\1" + b"\1\0")
"""


def case_garbage():
    tmp = tempfile.mkdtemp(prefix="cs-root-garbage-")
    script = os.path.join(tmp, "garbage.py")
    with open(script, "w") as f:
        f.write(GARBAGE)
    port = free_port()
    exch = os.path.join(tmp, "x")
    os.makedirs(exch)
    prog = ["sh", "-c", '"%s" "%s" %d > "%s/garbage.out" && torchrun --nproc-per-node %d "%s" '
            '"%s" %d' % (sys.executable, script, port, tmp, NP, PROG, exch, ITERS)]
    p, rundir, runfile = run_job(tmp, port, program=prog)
    T.check(p.returncode == 0, "commscope run exits 0 (%d): %s" % (p.returncode, p.stderr[-2000:]))
    got = open(os.path.join(tmp, "garbage.out")).read().splitlines() \
        if os.path.exists(os.path.join(tmp, "garbage.out")) else []
    print("garbage clients were told:", got)
    T.check(len(got) == 3 and all(l.startswith("CSROOTNO") for l in got),
            "each foreign client is refused: %r" % got)
    if len(got) == 3:
        T.check("not a commscope collector" in got[0] and "GET / HT" in got[0],
                "HTTP client told it is not a collector: %r" % got[0])
        T.check("protocol version 99" in got[1], "wrong version named: %r" % got[1])
        T.check("cut short" in got[2], "short hello named: %r" % got[2])
    T.check(p.stderr.count("root service: refused a connection from 127.0.0.1") == 3,
            "the service says each refusal on stderr: %r" % p.stderr[-1500:])
    T.check("3 connection(s) refused" in runfile and "%d trace(s) received" % NP in runfile,
            "run file: %r" % [l for l in runfile.splitlines() if "root" in l])
    check_arrived(tmp, rundir)
    rows, rep, _ = analyze(rundir, 0)
    check_counts(p.stdout, rows, range(NP))


def case_torchrun():
    exe = shutil.which("torchrun")
    cmd = [exe] if exe else None
    if not cmd:
        for py in ("/usr/bin/python3", sys.executable):
            if os.path.exists(py) and subprocess.run(
                    [py, "-c", "import torch.distributed.run"], capture_output=True).returncode == 0:
                cmd = [py, "-m", "torch.distributed.run"]
                break
    if not cmd:
        print("SKIP: no torchrun (install python3-torch)")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="cs-root-torch-")
    port = free_port()
    env = {"COMMSCOPE_TEST_CLOCK_SKEW": "%d:%d:0" % (SKEW_RANK, SKEW_NS),
           "OMP_NUM_THREADS": "1"}
    p, rundir, runfile = run_job(tmp, port, env, torchrun=cmd + [
        "--nproc_per_node=%d" % NP, "--master_port=%d" % free_port(),
        # Debian 12's torch 1.13 on Python 3.11 fails on the default "--redirects 0" (Std.NONE
        # is no longer an iteration member of an IntFlag): redirect and tee stdout instead.
        "--redirects", "1", "--tee", "1", "--no_python"])
    T.check(p.returncode == 0, "commscope run -- torchrun exits 0 (%d): %s"
            % (p.returncode, p.stderr[-2500:]))
    T.check("mpi_preload: no" in runfile, "torchrun gets no MPI collector")
    check_arrived(tmp, rundir)
    for r in range(NP):
        path = os.path.join(rundir, "rank-%05d.cst" % r)
        if os.path.exists(path):
            hdr = T.read_trace(path)[0]
            T.check(hdr["rank_source"] == 1 and hdr["world"] == NP and hdr["local_rank"] == r,
                    "rank %d: identity from RANK/WORLD_SIZE/LOCAL_RANK (source %d, world %d, "
                    "local %d)" % (r, hdr["rank_source"], hdr["world"], hdr["local_rank"]))
    rows, rep, _ = analyze(rundir, 0)
    check_counts(p.stdout, rows, range(NP))
    check_alignment(rows)


def case_master():
    """No COMMSCOPE_ROOT in the ranks' environment: they find the service at MASTER_ADDR, port
    MASTER_PORT + 1 (the torchrun double sets 127.0.0.1 and 29500)."""
    try:
        probe = socket.socket()
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(("127.0.0.1", 29501))
        probe.close()
    except OSError:
        print("SKIP: port 29501 is taken")
        sys.exit(77)
    tmp = tempfile.mkdtemp(prefix="cs-root-master-")
    exch = os.path.join(tmp, "x")
    os.makedirs(exch)
    prog = ["sh", "-c", 'unset COMMSCOPE_ROOT; exec torchrun --nproc-per-node %d "%s" "%s" %d'
            % (NP, PROG, exch, ITERS)]
    p, rundir, runfile = run_job(tmp, 29501, program=prog)
    T.check(p.returncode == 0, "commscope run exits 0 (%d): %s" % (p.returncode, p.stderr[-2000:]))
    T.check("%d trace(s) received" % NP in runfile, "run file: %r"
            % [l for l in runfile.splitlines() if "root" in l])
    check_arrived(tmp, rundir)


SLURM_CONF = """ClusterName=cstest
SlurmctldHost={host}
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
AuthType=auth/munge
AuthInfo=socket={dir}/munge.sock
CredType=cred/munge
StateSaveLocation={dir}/state
SlurmdSpoolDir={dir}/spool
SlurmctldPidFile={dir}/ctld.pid
SlurmdPidFile={dir}/d.pid
SlurmctldLogFile={dir}/ctld.log
SlurmdLogFile={dir}/d.log
SlurmUser=root
SlurmdUser=root
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
ReturnToService=2
SlurmdParameters=config_overrides
NodeName={host} CPUs=8 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
"""


def case_slurm():
    """The real srun: a private one-node Slurm (munged, slurmctld, slurmd started here as root
    with their own configuration, sockets and ports), `commscope run -- srun -n 4 ...`."""
    tools = ["/usr/sbin/munged", "/usr/sbin/slurmctld", "/usr/sbin/slurmd"]
    if os.geteuid() != 0 or not shutil.which("srun") or not all(map(os.path.exists, tools)):
        print("SKIP: needs root and Slurm (slurmctld, slurmd, slurm-client, munge)")
        sys.exit(77)
    d = tempfile.mkdtemp(prefix="cs-slurm-")
    os.chmod(d, 0o700)
    for sub in ("state", "spool"):
        os.makedirs(os.path.join(d, sub))
    with open(os.path.join(d, "munge.key"), "wb") as f:
        f.write(os.urandom(1024))
    os.chmod(os.path.join(d, "munge.key"), 0o600)
    conf = os.path.join(d, "slurm.conf")
    with open(conf, "w") as f:
        f.write(SLURM_CONF.format(host=socket.gethostname(), ctld_port=free_port(),
                                  d_port=free_port(), dir=d))
    env = dict(os.environ, SLURM_CONF=conf)
    started = []
    try:
        for cmd, pid in (([tools[0], "--force", "--socket=%s/munge.sock" % d,
                           "--key-file=%s/munge.key" % d, "--pid-file=%s/munge.pid" % d,
                           "--log-file=%s/munge.log" % d, "--seed-file=%s/munge.seed" % d],
                          "munge.pid"),
                         ([tools[1], "-i"], "ctld.pid"), ([tools[2]], "d.pid")):
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)
            if r.returncode != 0:
                print("SKIP: %s did not start: %s" % (cmd[0], r.stderr[-500:]))
                sys.exit(77)
            started.append(os.path.join(d, pid))
        ready = False
        for _ in range(100):
            r = subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                               text=True, timeout=30)
            if r.stdout.strip() == "idle":
                ready = True
                break
            subprocess.run(["sleep", "0.2"])
        if not ready:
            print("SKIP: the private Slurm node did not become idle: %r" % r.stdout)
            sys.exit(77)
        tmp = tempfile.mkdtemp(prefix="cs-root-slurm-")
        exch = os.path.join(tmp, "x")
        os.makedirs(exch)
        os.environ["SLURM_CONF"] = conf
        p, rundir, runfile = run_job(
            tmp, free_port(), {"COMMSCOPE_TEST_CLOCK_SKEW": "%d:%d:0" % (SKEW_RANK, SKEW_NS)},
            program=["srun", "-n", str(NP), PROG, exch, str(ITERS)])
        T.check(p.returncode == 0, "commscope run -- srun exits 0 (%d): %s"
                % (p.returncode, p.stderr[-2000:]))
        T.check("mpi_preload: no" in runfile, "srun of an NCCL program gets no MPI collector")
        check_arrived(tmp, rundir)
        for r in range(NP):
            path = os.path.join(rundir, "rank-%05d.cst" % r)
            if os.path.exists(path):
                hdr = T.read_trace(path)[0]
                T.check(hdr["rank_source"] == 2 and hdr["world"] == NP and hdr["local_rank"] == r,
                        "rank %d: identity from SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID (source "
                        "%d, world %d, local %d)" % (r, hdr["rank_source"], hdr["world"],
                                                     hdr["local_rank"]))
        rows, rep, _ = analyze(rundir, 0)
        check_counts(p.stdout, rows, range(NP))
        check_alignment(rows)
    finally:
        # Stop the daemons this test started, newest first, by the pids they wrote.
        for pidfile in reversed(started):
            try:
                os.kill(int(open(pidfile).read().split()[0]), 15)
            except (OSError, ValueError, IndexError):
                pass


def main():
    cases = {"vanished": case_vanished, "slurm": case_slurm, "master": case_master, "gather": case_gather, "unreachable": case_unreachable, "kill": case_kill,
             "garbage": case_garbage, "torchrun": case_torchrun}
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    if case not in cases:
        print("usage: test_root.py %s" % "|".join(cases), file=sys.stderr)
        return 2
    cases[case]()
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
