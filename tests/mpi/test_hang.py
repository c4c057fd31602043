#!/usr/bin/env python3
"""The hang and crash diagnosis on real MPI jobs that stop (tests/mpi/hang.c): each job runs
under `commscope run`, is ended by `timeout` (SIGTERM to mpirun, which passes it on) or ends by
itself, and `commscope analyze` must name the right ranks, op and communicator.

Usage: test_hang.py CASE; the environment as for test_mpi.py (whose helpers this uses).
Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import re
import shutil
import signal
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_mpi as h  # noqa: E402

check = h.check
PROG = h.program("cs_test_hang")
STOP_AFTER_S = 4


def wait_gone(rundir, limit_s=20):
    """Wait until the processes that wrote the traces are gone (a launcher may return while its
    ranks still die): the pid is at byte 40 of each header."""
    deadline = time.time() + limit_s
    for path in glob.glob(os.path.join(rundir, "rank-*.cst")):
        with open(path, "rb") as f:
            pid = struct.unpack_from("<i", f.read(44), 40)[0]
        while pid > 0 and time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)


def stopped_job(tmp, case, np=4, prog=None, env=None):
    """Run the case under commscope until it ends or `timeout` ends it; analyse it.  prog: a
    program other than cs_test_hang (run without arguments), env: what it needs besides."""
    rundir = os.path.join(tmp, "run")
    cmd = [prog] if prog else [PROG, case]
    argv = ["timeout", "-s", "TERM", str(STOP_AFTER_S)] + h.MPIRUN + ["-np", str(np)] + cmd
    p = h.run([h.COMMSCOPE, "run", "-o", rundir, "--quiet", "--"] + argv, env=env)
    check(p.stdout.count("ready") == np, "%s: every rank set up: %r" % (case, p.stdout[-400:]))
    wait_gone(rundir)
    js, html = os.path.join(tmp, "hang.json"), os.path.join(tmp, "hang.html")
    q = h.run([h.COMMSCOPE, "analyze", rundir, "--json", js, "--html", html])
    check(q.returncode == 4, "%s: analyze exits 4 for a job that stopped, got %d: %s"
          % (case, q.returncode, q.stderr[-400:]))
    with open(js) as f:
        rep = json.load(f)
    with open(html) as f:
        page = f.read()
    g = rep.get("hang")
    check(g is not None, "%s: the report has a hang section" % case)
    check("Hang diagnosis" in q.stdout, "%s: the text report has its section" % case)
    check('id="hang"' in page, "%s: the HTML report has its section" % case)
    verdict = rep.get("verdict", [])
    for words in ("arrives last", "Gradient synchronisation", "overlap"):
        check(not any(words in s and "left out" not in s for s in verdict),
              "%s: no timing finding on the hung step (%r): %r" % (case, words, verdict))
    return g or {"ranks": [], "collectives": [], "waits": [], "deadlocks": []}, verdict


def rank_entry(g, r):
    return next((x for x in g["ranks"] if x["rank"] == r), None)


def case_skip(tmp):
    """Rank 1 skips an all-reduce on a duplicated communicator and waits in a barrier."""
    g, verdict = stopped_job(tmp, "skip")
    check(g.get("hung") is True, "skip: hung")
    c = g["collectives"][0] if g["collectives"] else {}
    check(c.get("op") == "MPI_Allreduce" and c.get("comm") not in ("world", None),
          "skip: stuck in the all-reduce on the duplicate: %r" % c)
    check(c.get("missing") == [1], "skip: rank 1 never entered it: %r" % c.get("missing"))
    check(sorted(e["rank"] for e in c.get("entered", [])) == [0, 2, 3],
          "skip: ranks 0, 2, 3 entered: %r" % c.get("entered"))
    check(c.get("inside") == 3, "skip: the three are inside it: %r" % c.get("inside"))
    r1 = rank_entry(g, 1) or {}
    check((r1.get("in_call") or {}).get("op") == "MPI_Barrier",
          "skip: rank 1 is in MPI_Barrier: %r" % r1)
    # The launcher ends the ranks with SIGTERM, and SIGKILL when one outlives it a moment.
    check(r1.get("end") in ("signalled", "vanished") and r1.get("code") in (0, 15),
          "skip: rank 1 ended by the launcher: %r" % r1)
    check(verdict and "MPI_Allreduce" in verdict[0] and "rank 1 never did" in verdict[0]
          and "MPI_Barrier" in verdict[0], "skip: the verdict leads with it: %r" % verdict[:1])


def case_deadlock(tmp):
    """Ranks 0 and 1 each wait in MPI_Recv from the other."""
    g, verdict = stopped_job(tmp, "deadlock")
    check([sorted(c) for c in g["deadlocks"]] == [[0, 1]],
          "deadlock: one cycle of ranks 0 and 1: %r" % g["deadlocks"])
    waits = {w["rank"]: w for w in g["waits"]}
    for r in (0, 1):
        w = waits.get(r, {})
        check(w.get("op") == "MPI_Recv" and w.get("waits_for") == 1 - r and w.get("tag") == 7
              and w.get("deadlock") == 0, "deadlock: rank %d waits for %d: %r" % (r, 1 - r, w))
    check(verdict and verdict[0].startswith("Deadlock:") and "rank 0" in verdict[0]
          and "rank 1" in verdict[0], "deadlock: the verdict leads with it: %r" % verdict[:1])


def case_exit(tmp):
    """Rank 2 exits with status 3 without MPI_Finalize while the others wait for it."""
    g, verdict = stopped_job(tmp, "exit")
    r2 = rank_entry(g, 2) or {}
    check(r2.get("end") == "exited" and r2.get("code") == 3 and r2.get("in_call") is None,
          "exit: rank 2 exited with status 3 between calls: %r" % r2)
    c = g["collectives"][0] if g["collectives"] else {}
    check(c.get("op") == "MPI_Allreduce" and c.get("comm") == "world" and c.get("missing") == [2],
          "exit: the world all-reduce waits for rank 2: %r" % c)
    check(verdict and "rank 2 never did" in verdict[0] and "exited with status 3" in verdict[0],
          "exit: the verdict says so: %r" % verdict[:1])


def case_sigkill(tmp):
    """Rank 3 is killed (SIGKILL) inside an all-reduce on the communicator of ranks 2 and 3."""
    g, verdict = stopped_job(tmp, "sigkill")
    r3 = rank_entry(g, 3) or {}
    call = r3.get("in_call") or {}
    check(r3.get("end") == "vanished", "sigkill: rank 3 ended without warning: %r" % r3)
    check(call.get("op") == "MPI_Allreduce" and call.get("comm") not in ("world", None),
          "sigkill: rank 3 was inside the all-reduce of its pair: %r" % call)
    pair = [c for c in g["collectives"] if c["comm"] == call.get("comm")]
    check(pair and pair[0]["missing"] == [2] and [e["rank"] for e in pair[0]["entered"]] == [3],
          "sigkill: the pair's all-reduce: rank 3 in, rank 2 never: %r" % pair)
    check(any(v.startswith("Rank 3") and "without warning" in v and "MPI_Allreduce" in v
              for v in verdict), "sigkill: the verdict says rank 3 ended: %r" % verdict)


def case_mismatch(tmp):
    """An all-reduce whose counts differ between the ranks."""
    g, verdict = stopped_job(tmp, "mismatch")
    c = next((c for c in g["collectives"] if c["op"] == "MPI_Allreduce"), {})
    check(c.get("comm") == "world" and c.get("missing") == [] and c.get("mismatched_bytes"),
          "mismatch: every rank entered the world all-reduce, sizes differ: %r" % c)
    sizes = {e["rank"]: e["bytes"] for e in c.get("entered", [])}
    check(sizes == {0: 2 << 20, 1: 4 << 20, 2: 4 << 20, 3: 4 << 20},
          "mismatch: each rank's size: %r" % sizes)
    check(any("mismatched counts" in s and "MPI_Allreduce" in s for s in verdict),
          "mismatch: the verdict names it: %r" % verdict)


LIVE_TIMEOUT_S = 3


def live_job(tmp, case, extra, outer_s, np=4, prog=None, env=None):
    """Run the case under `commscope run --hang-timeout` (outer_s: a `timeout` that ends a job
    left running); return the run's process, its live diagnosis and its run file."""
    rundir = os.path.join(tmp, "run")
    cmd = [prog] if prog else [PROG, case]
    argv = ["timeout", "-s", "TERM", str(outer_s)] + h.MPIRUN + ["-np", str(np)] + cmd
    p = h.run([h.COMMSCOPE, "run", "-o", rundir, "--quiet", "--hang-timeout",
               str(LIVE_TIMEOUT_S)] + extra + ["--"] + argv, env=env)
    check(p.stdout.count("ready") == np, "%s: every rank set up: %r" % (case, p.stdout[-400:]))
    check("diagnosing the live job" in p.stderr and "Hang diagnosis" in p.stderr,
          "%s: the diagnosis is printed while the job runs: %r" % (case, p.stderr[-800:]))
    rep = {}
    path = os.path.join(rundir, "hang.json")
    if check(os.path.exists(path) and os.path.exists(os.path.join(rundir, "hang.txt")),
             "%s: hang.txt and hang.json written" % case):
        with open(path) as f:
            rep = json.load(f)
    with open(os.path.join(rundir, "commscope-run.txt")) as f:
        runfile = f.read()
    # The quiet time the watcher measured when it fired (its poll is at most 0.5 s).
    m = re.search(r"hang: no rank completed a call for ([0-9.]+) s", runfile)
    check(m and LIVE_TIMEOUT_S <= float(m.group(1)) < LIVE_TIMEOUT_S + 5,
          "%s: fired after the timeout: %r" % (case, runfile[-600:]))
    return p, rep, runfile


def case_live_skip(tmp):
    """--hang-timeout on the skipped all-reduce: diagnosed while alive, then the job is ended."""
    p, rep, runfile = live_job(tmp, "skip", [], 120)
    g = rep.get("hang") or {}
    c = (g.get("collectives") or [{}])[0]
    check(g.get("hung") is True and c.get("op") == "MPI_Allreduce" and c.get("missing") == [1],
          "live skip: rank 1 never entered the all-reduce: %r" % c)
    r1 = rank_entry(g, 1) or {}
    check(r1.get("end") == "running" and (r1.get("in_call") or {}).get("op") == "MPI_Barrier",
          "live skip: rank 1 runs, in MPI_Barrier: %r" % r1)
    check("hang_action: SIGTERM" in runfile, "live skip: the job was ended: %r" % runfile[-400:])
    check(p.returncode != 0, "live skip: the run says the job did not succeed: %d" % p.returncode)


def case_live_keep(tmp):
    """--hang-keep on a deadlock: diagnosed, and the job is left to the outer timeout."""
    p, rep, runfile = live_job(tmp, "deadlock", ["--hang-keep"], 12)
    g = rep.get("hang") or {}
    check([sorted(c) for c in g.get("deadlocks", [])] == [[0, 1]],
          "live keep: the deadlock of ranks 0 and 1: %r" % g.get("deadlocks"))
    check("hang_action" not in runfile, "live keep: the job was left alone: %r" % runfile[-400:])
    check(p.returncode == 124, "live keep: the outer timeout ended it: %d" % p.returncode)


def case_live_freeze(tmp):
    """--hang-timeout on a rank that froze (SIGSTOP, its progress reports too): the others'
    traces are there as they are, and rank 1 is named as the rank whose reports stopped."""
    p, rep, runfile = live_job(tmp, "freeze", [], 120)
    g = rep.get("hang") or {}
    c = (g.get("collectives") or [{}])[0]
    check(g.get("hung") is True and c.get("op") == "MPI_Allreduce" and c.get("missing") == [1],
          "live freeze: rank 1 never entered the all-reduce: %r" % c)
    m = re.search(r"hang_silent: (.*)", runfile)
    check(m and m.group(1).startswith("rank 1 (") and "no report for" in m.group(1)
          and "rank 0" not in m.group(1), "live freeze: rank 1 named as silent: %r" % runfile[-600:])
    with open(os.path.join(tmp, "run", "hang.txt")) as f:
        txt = f.read()
    check("Ranks without a live snapshot (progress reports): rank 1 (" in txt,
          "live freeze: hang.txt names it: %r" % txt[-400:])
    check("hang_action: SIGTERM" in runfile, "live freeze: the job was ended: %r" % runfile[-400:])
    # Never leave a stopped process behind, whatever the launcher did.
    for f in glob.glob(os.path.join(tmp, "run", "rank-*.cst")):
        with open(f, "rb") as fh:
            pid = struct.unpack_from("<i", fh.read(44), 40)[0]
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                ours = b"cs_test_hang" in fh.read()
        except OSError:
            ours = False
        for sig in (signal.SIGCONT, signal.SIGKILL) if ours else ():
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def case_watch_unreachable(tmp):
    """Progress reports (COMMSCOPE_WATCH_MS) to a root service that refuses connections, and to
    one that accepts and never answers: at most one warning per rank, the job's exit and results as
    without them, every call recorded; MPI_Finalize does not wait for the silent service."""
    import socket
    pre = os.path.join(h.LIB, "mpich" if h.MPICH else "", "libcommscope_mpi.so")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()
    mute = socket.socket()
    mute.bind(("127.0.0.1", 0))
    mute.listen(16)
    for variant, addr in (("refused", port), ("mute", mute.getsockname()[1])):
        rundir = os.path.join(tmp, variant)
        env = {"LD_PRELOAD": pre, "COMMSCOPE_DIR": rundir, "COMMSCOPE_WATCH_MS": "50",
               "COMMSCOPE_ROOT": "127.0.0.1:%d" % addr, "COMMSCOPE_ROOT_TIMEOUT_MS": "300"}
        pass_env = [] if h.MPICH else sum((["-x", k] for k in sorted(env)), [])
        p = h.run(h.MPIRUN + ["-np", "3"] + pass_env + [h.TRAIN, "--steps", "4"], env=env)
        check(p.returncode == 0, "%s: the job exits 0: %d %s" % (variant, p.returncode,
                                                               p.stderr[-600:]))
        warn = [ln for ln in p.stderr.splitlines() if "progress reports to the root service" in ln]
        ranks = sorted(re.search(r"rank (\d+)", ln).group(1) for ln in warn)
        # A refusal is known at once; a silence only after the timeout, which a rank that
        # finalized before it never waits for (and then has nothing to warn about).
        check(ranks == ["0", "1", "2"] if variant == "refused" else
              len(set(ranks)) == len(ranks), "%s: one warning per rank at most: %r"
              % (variant, warn))
        js = os.path.join(tmp, variant + ".json")
        q = h.run([h.COMMSCOPE, "analyze", rundir, "--quiet", "--json", js])
        check(q.returncode == 0, "%s: analysed, exit 0: %d %s" % (variant, q.returncode,
                                                                q.stderr[-400:]))
        if os.path.exists(js):
            with open(js) as f:
                h.compare_ops(h.self_reported_ops(p.stdout, "cs_train"), json.load(f))
    mute.close()


# NCCL jobs: tests/mpi/nccl_hang.c on the CPU NCCL and CUDA test doubles, whose collectives
# return at once and whose kernels run until every member enqueued them (FAKE_NCCL_ASYNC).
NCCL_PROG = os.path.join(h.BIN, "cs_test_nccl_hang")


def nccl_env(tmp, events=False):
    shm = os.path.join(tmp, "shm")
    os.makedirs(shm, exist_ok=True)
    env = {"FAKE_NCCL_ASYNC": "1", "FAKE_NCCL_DIR": shm,
           "COMMSCOPE_CUPTI_LIB": os.environ.get("CS_FAKE_CUPTI", "")}
    if events:  # CUPTI refuses: NCCL launches timed with CUDA events
        env["FAKE_CUPTI_REFUSE"] = "1"
    return env


def check_nccl_skip(what, g, verdict):
    """Rank 1 skipped ncclAllReduce #3 and waits in MPI_Barrier; the others' kernels never end."""
    check(g.get("hung") is True, "%s: hung" % what)
    c = (g.get("collectives") or [{}])[0]
    check(c.get("nccl") is True and c.get("op") == "ncclAllReduce" and c.get("seq") == 3,
          "%s: stuck in ncclAllReduce #3 first: %r" % (what, c))
    check(c.get("missing") == [1], "%s: rank 1 never enqueued it: %r" % (what, c.get("missing")))
    ent = c.get("entered", [])
    check(sorted(e["rank"] for e in ent) == [0, 2, 3]
          and all(e.get("kernel") == "not_completed" and e.get("bytes") == 4096 for e in ent)
          and c.get("kernels_open") == 3,
          "%s: ranks 0, 2, 3 enqueued 4096 B, no kernel completed: %r" % (what, c))
    r1 = rank_entry(g, 1) or {}
    check((r1.get("in_call") or {}).get("op") == "MPI_Barrier",
          "%s: rank 1 waits in MPI_Barrier: %r" % (what, r1))
    check(bool(verdict) and "ncclAllReduce #3" in verdict[0]
          and "rank 1 never enqueued it" in verdict[0] and "no completion of its kernel" in verdict[0],
          "%s: the verdict leads with it: %r" % (what, verdict[:2]))


def case_nccl_skip(tmp):
    """An NCCL rank skips a collective (kernels timed by CUPTI, the fake)."""
    g, verdict = stopped_job(tmp, "nccl_skip", prog=NCCL_PROG, env=nccl_env(tmp))
    check_nccl_skip("nccl skip", g, verdict)


def case_nccl_skip_events(tmp):
    """The same with the kernels timed by CUDA events; and the job without the skip is no hang."""
    clean = os.path.join(tmp, "clean")
    p = h.run([h.COMMSCOPE, "run", "-o", clean, "--quiet", "--"] + h.MPIRUN
              + ["-np", "4", NCCL_PROG, "5", "-1"], env=nccl_env(tmp, events=True))
    with open(os.path.join(clean, "commscope-run.txt")) as f:
        runfile = f.read()
    check("\nexit_status: 0\n" in runfile, "nccl clean: the job ends by itself: %r %r"
          % (runfile[-200:], p.stderr[-400:]))
    js = os.path.join(tmp, "clean.json")
    h.run([h.COMMSCOPE, "analyze", clean, "--json", js])
    with open(js) as f:
        rep = json.load(f)
    check(rep.get("hang") is None, "nccl clean: no hang section: %r" % rep.get("hang"))
    g, verdict = stopped_job(tmp, "nccl_skip", prog=NCCL_PROG, env=nccl_env(tmp, events=True))
    check_nccl_skip("nccl skip (CUDA events)", g, verdict)


def case_nccl_live(tmp):
    """--hang-timeout on the NCCL job: the ranks stuck in cudaStreamSynchronize make no call."""
    p, rep, runfile = live_job(tmp, "nccl_live", [], 120, prog=NCCL_PROG, env=nccl_env(tmp))
    g = rep.get("hang") or {}
    check_nccl_skip("nccl live", g, rep.get("verdict", []))
    r0 = rank_entry(g, 0) or {}
    check(r0.get("end") == "running", "nccl live: rank 0 still runs: %r" % r0)
    check("hang_action: SIGTERM" in runfile, "nccl live: the job was ended: %r" % runfile[-400:])


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_hang.py {%s}" % ",".join(sorted(CASES)), file=sys.stderr)
        return 2
    if not shutil.which(h.MPIRUN[0]) or not shutil.which("timeout"):
        print("skip: %s or timeout not found" % h.MPIRUN[0])
        return 77
    for p in (h.COMMSCOPE, NCCL_PROG if sys.argv[1].startswith("nccl") else PROG):
        if not os.access(p, os.X_OK):
            print("FAIL: %s not built" % p, file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="cs-hang-")
    try:
        CASES[sys.argv[1]](tmp)
    finally:
        if not h.failures:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp, file=sys.stderr)
    if h.failures:
        print("%d checks failed" % len(h.failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
