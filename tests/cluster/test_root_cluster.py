#!/usr/bin/env python3
"""The root service across hosts: two network namespaces (cluster.sh, hosts h1 and h2 with their
own addresses and host names), `commscope run --root 10.77.0.1:PORT` in h1, ranks 0-1 of
cs_nccl_ranks (CPU NCCL test double, which meets through files every namespace sees) in h1 and
ranks 2-3 in h2, each writing its trace to a directory of its own.  Rank 2's clock is 7 s ahead
and its host's CLOCK_REALTIME made to look 3 s behind, so only the ping-pong over the namespace
link can align it.  Every trace must arrive in the run directory over TCP, every call be counted,
and every world all-reduce overlap on all ranks after alignment (within 1 ms).

Usage: test_root_cluster.py (ctest; CS_BIN, CS_LIB, CS_TESTBIN in the environment).  Runs itself
inside the cluster as "inner" and as the launcher ("launch").  Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "nccl"))
import test_nccl as T  # noqa: E402
import test_root as R  # noqa: E402

PORT = 29650


def agent_path():
    """mpirun's remote-shell agent of cluster.sh: `agent ADDR CMD...` runs CMD in that host."""
    args = os.environ.get("CS_CLUSTER_MPI_ARGS", "").split()
    return args[args.index("plm_rsh_agent") + 1] if "plm_rsh_agent" in args else None


def launch(tmp):
    """Start 4 ranks, 2 per host, with torchrun's variables; exit with the first failure."""
    exch = os.path.join(tmp, "x")
    os.makedirs(exch, exist_ok=True)
    agent = agent_path()
    procs = []
    for r in range(R.NP):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(R.NP), LOCAL_RANK=str(r % 2),
                   FAKE_NCCL_DIR=tmp, COMMSCOPE_LOCAL_DIR=os.path.join(tmp, "local", "%h-%r"),
                   COMMSCOPE_TEST_CLOCK_SKEW="%d:%d:0" % (R.SKEW_RANK, R.SKEW_NS),
                   COMMSCOPE_TEST_REALTIME_SKEW="%d:%d" % (R.SKEW_RANK, R.REALTIME_SKEW_NS))
        cmd = [R.PROG, exch, str(R.ITERS)]
        if r >= 2:
            cmd = [agent, "10.77.0.2"] + cmd  # ip netns exec keeps the environment
        procs.append(subprocess.Popen(cmd, env=env))
    rcs = [p.wait() for p in procs]
    return next((rc for rc in rcs if rc), 0)


def inner():
    if not agent_path():
        print("no cluster agent in CS_CLUSTER_MPI_ARGS", file=sys.stderr)
        return 1
    tmp = tempfile.mkdtemp(prefix="cs-root-cluster-")
    rundir = os.path.join(tmp, "run")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.pop("COMMSCOPE_ROOT", None)
    p = subprocess.run([R.COMMSCOPE, "run", "-o", rundir, "--quiet", "--root",
                        "10.77.0.1:%d" % PORT, "--", sys.executable, os.path.abspath(__file__),
                        "launch", tmp], env=env, capture_output=True, text=True, timeout=200)
    print(p.stderr[-3000:], file=sys.stderr)
    T.check(p.returncode == 0, "commscope run exits 0 (%d)" % p.returncode)
    T.check("root service" not in p.stderr and "commscope[" not in p.stderr,
            "no warnings: %r" % p.stderr[-1500:])
    runfile = open(os.path.join(rundir, "commscope-run.txt")).read()
    T.check("10.77.0.1:%d, %d trace(s) received" % (PORT, R.NP) in runfile,
            "run file: %r" % [l for l in runfile.splitlines() if "root" in l])
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    T.check(len(files) == R.NP, "%d traces in the run directory, found %d" % (R.NP, len(files)))
    for r in range(R.NP):
        host = "h1" if r < 2 else "h2"
        local = os.path.join(tmp, "local", "%s-%d" % (host, r), "rank-%05d.cst" % r)
        got = os.path.join(rundir, "rank-%05d.cst" % r)
        if not T.check(os.path.exists(local) and os.path.exists(got),
                       "rank %d wrote %s on %s and it is in the run directory" % (r, local, host)):
            continue
        T.check(open(local, "rb").read() == open(got, "rb").read(),
                "rank %d: the run directory holds exactly its local file" % r)
        with open(got, "rb") as f:
            hdr = f.read(4096)
        trace_host = hdr[184:248].split(b"\0")[0].decode()
        T.check(trace_host == host, "rank %d ran on %s (trace says %s)" % (r, host, trace_host))
        h = T.read_trace(got)[0]
        T.check(h["flags"] & R.FLAG_CLOCK_ROOT, "rank %d aligned through the service" % r)
        s = R.clock_samples(got)
        T.check(all(x["valid"] == 1 and x["rounds"] == 16 for x in s),
                "rank %d: both clock samples from 16 rounds: %s" % (r, s))
    rows, rep, _ = T.analyze(rundir, want_rc=0)
    T.check(sorted(x["rank"] for x in rep.get("ranks", [])) == list(range(R.NP)),
            "the analysis sees every rank")
    R.check_counts(p.stdout, rows, range(R.NP))
    R.check_alignment(rows)
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode == "launch":
        return launch(sys.argv[2])
    if mode == "inner":
        return inner()
    r = subprocess.run(["bash", os.path.join(HERE, "cluster.sh"), "-n", "2", "--",
                        sys.executable, os.path.abspath(__file__), "inner"], timeout=280)
    return r.returncode


if __name__ == "__main__":
    sys.exit(main())
