#!/usr/bin/env python3
"""`commscope run` with launchers of jobs that are not MPI programs: fake torchrun and srun
(tests/nccl/fake_launcher.py, installed under those names on PATH) start N processes of
cs_nccl_ranks on the CPU NCCL test double; the MPI collector must not be preloaded, every rank
must leave a trace, and the analysis must count their NCCL calls.  Also the preload choice for
MPI launchers, MPI programs under srun, and the --mpi/--no-mpi options (dry runs).

Usage: test_launch.py torchrun|srun|choice; CS_BIN, CS_LIB, CS_TESTBIN from ctest.
"""
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nccl as T  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
COMMSCOPE = os.path.join(T.BIN, "commscope")
MPI_LIB = os.path.join(T.LIB, "libcommscope_mpi.so")


def launcher_dir(tmp):
    d = os.path.join(tmp, "bin")
    os.makedirs(d)
    for name in ("torchrun", "srun", "mpirun", "python3"):
        # Absolute interpreter: a `python3` on this PATH is the fake itself.
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write('#!/bin/sh\nexec "%s" "%s" --as %s "$@"\n'
                    % (sys.executable, os.path.join(HERE, "fake_launcher.py"), name))
        os.chmod(path, 0o755)
    return d


def commscope_run(tmp, opts, argv, dry=False):
    env = dict(os.environ)
    env["PATH"] = launcher_dir(tmp) + ":" + env.get("PATH", "")
    env["FAKE_LAUNCHER_ENV_OUT"] = os.path.join(tmp, "preload.txt")
    env["FAKE_NCCL_DIR"] = tmp
    env.pop("LD_PRELOAD", None)
    if dry:
        env["FAKE_LAUNCHER_DRY"] = "1"
    rundir = os.path.join(tmp, "run")
    p = subprocess.run([COMMSCOPE, "run", "-o", rundir, "--quiet"] + opts + ["--"] + argv,
                       env=env, capture_output=True, text=True, timeout=120)
    pre = open(os.path.join(tmp, "preload.txt")).read().strip() \
        if os.path.exists(os.path.join(tmp, "preload.txt")) else None
    runfile = open(os.path.join(rundir, "commscope-run.txt")).read() \
        if os.path.exists(os.path.join(rundir, "commscope-run.txt")) else ""
    return p, pre, rundir, runfile


def case_job(launcher, np_, source):
    tmp = tempfile.mkdtemp(prefix="cs-launch-")
    exch = os.path.join(tmp, "x")
    os.makedirs(exch)
    opt = ["--nproc-per-node", str(np_)] if launcher == "torchrun" else ["-n", str(np_)]
    p, pre, rundir, runfile = commscope_run(
        tmp, [], [launcher] + opt + [os.path.join(T.TESTBIN, "cs_nccl_ranks"), exch, "2"])
    T.check(p.returncode == 0, "commscope run -- %s exits 0 (%d): %s"
            % (launcher, p.returncode, p.stderr[-1500:]))
    T.check(pre is not None and pre.split(":")[0].endswith("/libcommscope.so") and
            "libcommscope_mpi" not in pre,
            "%s's processes get libcommscope.so only: %r" % (launcher, pre))
    T.check("mpi_preload: no" in runfile, "run file says no MPI preload: %r"
            % [l for l in runfile.splitlines() if "mpi" in l])
    files = glob.glob(os.path.join(rundir, "rank-*.cst"))
    T.check(len(files) == np_, "%d traces, found %d" % (np_, len(files)))
    for path in files:
        hdr, events, comms = T.read_trace(path)
        T.check(hdr["world"] == np_ and hdr["rank_source"] == source,
                "%s: world %d, rank source %d" % (path, hdr["world"], hdr["rank_source"]))
    rep = json.load(open(os.path.join(rundir, "report.json")))
    ops = rep.get("ops", [])
    calls = sum(o["calls"] for o in ops if o["op"] == "ncclAllReduce")
    # Per rank: 2 iterations x 3 all-reduces + 3 on the split communicator.
    T.check(calls == np_ * (2 * 3 + 3), "report counts %d all-reduces, program made %d"
            % (calls, np_ * 9))


def case_choice():
    have_mpi = os.path.exists(MPI_LIB)
    train = os.path.join(T.BIN, "cs_train")
    cases = [([], ["mpirun", "-np", "2", "true"], True),
             (["--no-mpi"], ["mpirun", "-np", "2", "true"], False),
             (["--mpi"], ["torchrun", "--nproc-per-node", "2", "x.py"], True),
             ([], ["torchrun", "--nproc-per-node", "2", "x.py"], False),
             ([], ["python3", "-m", "torch.distributed.run", "x.py"], False),
             ([], ["srun", "-n", "2", os.path.join(T.TESTBIN, "cs_nccl_ranks")], False)]
    if os.path.exists(train):
        cases.append(([], ["srun", "-N", "1", "-n", "2", train], True))
    for opts, argv, want in cases:
        tmp = tempfile.mkdtemp(prefix="cs-choice-")
        p, pre, rundir, runfile = commscope_run(tmp, opts + ["--no-analyze"], argv, dry=True)
        T.check(p.returncode == 0 and pre is not None, "%s %s ran: %s" % (opts, argv, p.stderr))
        got = pre is not None and "libcommscope_mpi.so" in pre
        T.check(got == (want and have_mpi), "%s %s: MPI collector preloaded %s, want %s (%r)"
                % (opts, " ".join(os.path.basename(a) for a in argv), got, want and have_mpi,
                   pre))
        T.check(("mpi_preload: yes" if want else "mpi_preload: no") in runfile,
                "run file states the choice: %r"
                % [l for l in runfile.splitlines() if "mpi_preload" in l])


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else ""
    cases = {"torchrun": lambda: case_job("torchrun", 4, 1),
             "srun": lambda: case_job("srun", 3, 2), "choice": case_choice}
    if case not in cases:
        print("usage: test_launch.py %s" % "|".join(cases), file=sys.stderr)
        return 2
    cases[case]()
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
