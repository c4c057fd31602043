#!/usr/bin/env python3
"""MPI integration tests: real Open MPI jobs run under `commscope run`, then the report checked
against what the programs measured and counted themselves.

Usage: test_mpi.py CASE [options]; CS_BIN and CS_LIB name the build's bin/ and lib/ folders;
CS_MPI_FAMILY=mpich runs the MPICH builds of the programs (NAME_mpich) under mpirun.mpich.
Exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE).
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("CS_BIN", "")
LIB = os.environ.get("CS_LIB", "")
COMMSCOPE = os.path.join(BIN, "commscope")
# The MPI family under test: Open MPI (the default build) or MPICH (the _mpich builds).
MPICH = os.environ.get("CS_MPI_FAMILY") == "mpich"
if MPICH:
    MPIRUN = ["mpirun.mpich"]
else:
    MPIRUN = ["mpirun", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]


def program(name):
    """A test program of the family under test: BIN/NAME, or BIN/NAME_mpich."""
    return os.path.join(BIN, name + ("_mpich" if MPICH else ""))


TRAIN = program("cs_train")

failures = []


def check(cond, what):
    """Record a failed expectation (with both sides in `what`) and go on."""
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def run(cmd, env=None, timeout=150, check_rc=None):
    e = dict(os.environ)
    if env:
        e.update(env)
    p = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    if check_rc is not None and p.returncode != check_rc:
        print("command:", " ".join(cmd), file=sys.stderr)
        print("stdout:", p.stdout[-4000:], file=sys.stderr)
        print("stderr:", p.stderr[-4000:], file=sys.stderr)
        raise SystemExit("exit status %d, expected %d" % (p.returncode, check_rc))
    return p


def commscope_run(rundir, argv, env=None, extra=None, check_rc=0):
    cmd = [COMMSCOPE, "run", "-o", rundir, "--quiet"] + (extra or []) + ["--"] + argv
    return run(cmd, env=env, check_rc=check_rc)


def load_report(rundir):
    path = os.path.join(rundir, "report.json")
    with open(path) as f:
        rep = json.load(f)
    check(rep.get("schema") == "commscope-report/1", "schema is %r" % rep.get("schema"))
    return rep


def self_reported_ops(stdout, prefix):
    """Parse '<prefix>: op NAME calls=C bytes=B' lines printed by a test program."""
    ops = {}
    lead = prefix + ": " if prefix else ""
    for m in re.finditer(r"%sop (\S+) calls=(\d+)(?: bytes=(\d+))?" % lead, stdout, re.M):
        ops[m.group(1)] = (int(m.group(2)), int(m.group(3)) if m.group(3) else None)
    return ops


def report_op_totals(rep):
    """Totals per MPI op name over all communicators."""
    tot = {}
    for o in rep["ops"]:
        c, b = tot.get(o["op"], (0, 0))
        tot[o["op"]] = (c + o["calls"], b + o["bytes"])
    return tot


def compare_ops(expected, rep):
    got = report_op_totals(rep)
    check(len(expected) > 0, "the program reported its MPI calls")
    for name, (calls, nbytes) in sorted(expected.items()):
        g = got.get(name, (0, 0))
        check(g[0] == calls, "%s calls: commscope %d, program %d" % (name, g[0], calls))
        if nbytes is not None:
            check(g[1] == nbytes, "%s bytes: commscope %d, program %d" % (name, g[1], nbytes))


def check_trace_complete(rep, n):
    t = rep["trace"]
    check(t["ranks_found"] == n, "ranks_found %r, expected %d" % (t["ranks_found"], n))
    check(t["ranks_expected"] == n, "ranks_expected %r" % t["ranks_expected"])
    check(t["missing_ranks"] == [], "missing ranks %r" % t["missing_ranks"])
    check(t["partial_ranks"] == [], "partial ranks %r" % t["partial_ranks"])
    check(t["dropped_events"] == 0, "dropped %r" % t["dropped_events"])
    check(len(rep["ranks"]) == n, "ranks[] has %d entries" % len(rep["ranks"]))
    check(sorted(r["rank"] for r in rep["ranks"]) == list(range(n)), "rank ids")
    for r in rep["ranks"]:
        check(r["wall_s"] > 0, "rank %d wall_s %r" % (r["rank"], r["wall_s"]))
        check(abs(r["compute_s"] + r["comm_s"] - r["wall_s"]) < 1e-6,
              "rank %d compute+comm == wall" % r["rank"])


# ---- cases -----------------------------------------------------------------------------------

def case_example_counts(a, tmp):
    rundir = os.path.join(tmp, "run")
    argv = MPIRUN + ["-np", str(a.np), TRAIN, "--steps", "8"] + (["--overlap"] if a.overlap else [])
    p = commscope_run(rundir, argv)
    expected = self_reported_ops(p.stdout, "cs_train")
    rep = load_report(rundir)
    compare_ops(expected, rep)
    check_trace_complete(rep, a.np)
    if a.overlap:
        names = {o["op"] for o in rep["ops"]}
        check("MPI_Iallreduce" in names, "overlap run shows MPI_Iallreduce: %r" % names)
        check("MPI_Waitall" in names, "overlap run shows MPI_Waitall: %r" % names)
    # Every all-reduce instance is matched across all ranks.
    check(rep["instances"]["matched"] > 0, "matched instances %r" % rep["instances"])
    check(rep["instances"]["incomplete"] == 0, "incomplete instances %r" % rep["instances"])
    allr = [o for o in rep["ops"] if o["op"] in ("MPI_Allreduce", "MPI_Iallreduce")
            and o["comm"] == "world"]
    check(allr and all(o["busbw_gbps"] is not None and o["busbw_gbps"] > 0 for o in allr),
          "all-reduce busbw reported: %r" % allr)
    for o in allr:
        if o["algbw_gbps"]:
            f = 2.0 * (a.np - 1) / a.np
            # (both printed with 9 significant digits: each off by up to 5e-9 of itself)
            check(abs(o["busbw_gbps"] - o["algbw_gbps"] * f) <= 2e-8 * o["busbw_gbps"],
                  "busbw = algbw * 2(n-1)/n: %r" % o)


def case_ring_counts(a, tmp):
    """A run far longer than its 1 MiB traces hold (ring mode, the default), blocking or with
    --overlap (requests in flight across the window's start): the whole-run totals are the
    program's own calls and bytes, the window holds whole collectives, and the analysis lists no
    problem."""
    rundir = os.path.join(tmp, "run")
    # A small model, so that the steps are short and many; the program marks its steps.
    argv = MPIRUN + ["-np", str(a.np), TRAIN, "--steps", str(a.steps), "--hidden", "8",
                     "--batch", "4", "--buckets", "8", "--steps-marker"] + \
        (["--overlap"] if a.overlap else [])
    p = commscope_run(rundir, argv, env={"COMMSCOPE_MAX_MB": "1"})
    rep = load_report(rundir)
    compare_ops(self_reported_ops(p.stdout, "cs_train"), rep)
    t = rep["trace"]
    check(t["window_ranks"] == a.np and t["outside_events"] > 0 and t["dropped_events"] == 0,
          "every rank kept a window, nothing dropped: %r" % t)
    check(t["problems"] == [], "no problem: %r" % t["problems"])
    check(rep["instances"]["incomplete"] == 0 and rep["instances"]["matched"] > 0,
          "whole collectives in the window: %r" % rep["instances"])
    s = rep["steps"]
    m = re.search(r"^cs_train: steps=(\d+)", p.stdout, re.M)
    want = int(m.group(1)) if m else a.steps
    check(s["source"] == "marker" and s["run_count"] == want and s["count"] < want,
          "steps: %r in the window, %r in the whole run, the program ran %d"
          % (s["count"], s["run_count"], want))


def case_straggler(a, tmp):
    rundir = os.path.join(tmp, "run")
    slow = a.np - 2
    argv = MPIRUN + ["-np", str(a.np), TRAIN, "--steps", "10", "--slow-rank", str(slow),
                     "--slow-factor", "4"]
    p = commscope_run(rundir, argv)
    rep = load_report(rundir)
    check_trace_complete(rep, a.np)
    s = rep["stragglers"]
    check(len(s) > 0 and s[0]["rank"] == slow,
          "straggler named first: expected rank %d, got %r" % (slow, s[:3]))
    if s:
        check(s[0]["others_waited_s"] > 0, "others waited for the straggler: %r" % s[0])
    m = re.search(r"^cs_train: load_balance=([0-9.]+)", p.stdout, re.M)
    check(m is not None, "cs_train printed its load balance")
    if m:
        lb = float(m.group(1))
        got = rep["pop"]["load_balance"]
        check(abs(got - lb) <= 0.05, "load balance: commscope %.4f, program %.4f" % (got, lb))
        check(lb < 0.9, "the slowed rank unbalances the load (%.3f)" % lb)
    # The straggler waits least of all ranks.
    waits = {r["rank"]: r["wait_s"] for r in rep["ranks"]}
    check(min(waits, key=waits.get) == slow, "slow rank waits least: %r" % waits)


def case_partial_rank(a, tmp):
    rundir = os.path.join(tmp, "run")
    n_calls, victim = 25, 1
    prog = program("cs_test_crash")
    p = commscope_run(rundir, MPIRUN + ["-np", "3", prog, str(n_calls), str(victim)],
                      extra=["--no-analyze"], check_rc=None)
    check(p.returncode != 0, "the job with a killed rank fails (%d)" % p.returncode)
    files = sorted(glob.glob(os.path.join(rundir, "rank-*.cst")))
    check(len(files) == 3, "three rank files: %r" % files)
    js = os.path.join(tmp, "r.json")
    q = run([COMMSCOPE, "analyze", rundir, "--json", js, "--quiet"])
    check(q.returncode == 4, "analysis of the partial run completes, status 4 (a rank died):"
          " %d: %s" % (q.returncode, q.stderr[-2000:]))
    with open(js) as f:
        rep = json.load(f)
    gone = {x["rank"]: x for x in (rep.get("hang") or {}).get("ranks", [])}
    check(gone.get(victim, {}).get("end") in ("vanished", "signalled"),
          "the hang diagnosis says how the victim ended: %r" % gone.get(victim))
    check(victim in rep["trace"]["partial_ranks"], "rank %d flagged partial: %r"
          % (victim, rep["trace"]["partial_ranks"]))
    ranks = {r["rank"]: r for r in rep["ranks"]}
    check(victim in ranks and ranks[victim]["partial"] is True, "ranks[].partial for the victim")
    # The killed rank's trace keeps every all-reduce it completed: all n_calls.  Another rank may
    # still be inside its last all-reduce when the victim has left it and killed itself; the
    # launcher then ends that rank there (MPICH's does so at once), so its trace has n_calls - 1
    # (a call is recorded when it returns).  The op table adds up the ranks' calls.
    check(ranks[victim]["calls"] == n_calls, "the victim's all-reduces: %d, expected %d"
          % (ranks[victim]["calls"], n_calls))
    for r in ranks:
        check(ranks[r]["calls"] in (n_calls - 1, n_calls), "rank %d's all-reduces: %d, expected"
              " %d (or %d when ended inside the last)" % (r, ranks[r]["calls"], n_calls,
                                                          n_calls - 1))
    total = sum(o["calls"] for o in rep["ops"] if o["op"] == "MPI_Allreduce")
    check(total == sum(x["calls"] for x in ranks.values()),
          "all-reduce calls over 3 ranks: %d, the ranks' %r" % (total, ranks))
    check(re.search(r"partial", json.dumps(rep["trace"])) is not None, "trace mentions partial")


def read_events_csv(path):
    ev = []
    with open(path) as f:
        header = f.readline().strip().split(",")
        for line in f:
            ev.append(dict(zip(header, line.strip().split(","))))
    return ev


def case_clock_skew(a, tmp):
    """Rank 1's clock is shifted by 5 s and runs 200 ppm fast; after alignment, every one of its
    barrier events must land within 10 us of the true time its own program measured."""
    rundir = os.path.join(tmp, "run")
    prefix = os.path.join(tmp, "truth")
    off_ns, ppm = 5000000000, 200
    env = {"COMMSCOPE_TEST_CLOCK_SKEW": "1:%d:%d" % (off_ns, ppm)}
    prog = program("cs_test_clockcheck")
    commscope_run(rundir, MPIRUN + ["-np", "2", prog, "40", "25000", prefix], env=env,
                  extra=["--no-analyze"])
    js = os.path.join(tmp, "r.json")
    evcsv = os.path.join(tmp, "events.csv")
    run([COMMSCOPE, "analyze", rundir, "--json", js, "--events", evcsv, "--quiet"], check_rc=0)
    with open(js) as f:
        rep = json.load(f)
    clk = {c["rank"]: c for c in rep["clock"]["ranks"]}
    check(1 in clk, "clock entry for rank 1")
    if 1 in clk:
        c = clk[1]
        # Offset at init: -(5 s + drift accumulated between the variable's parse and MPI_Init).
        check(abs(c["offset_init_s"] + 5.0) < 2e-3, "offset at init %r ~ -5 s" % c["offset_init_s"])
        check(abs(c["drift_ppm"] + ppm) < 20, "drift %r ppm ~ -%d" % (c["drift_ppm"], ppm))
    check(rep["clock"]["max_offset_s"] >= 4.99, "max_offset_s %r" % rep["clock"]["max_offset_s"])
    check(rep["clock"]["violations_repaired"] == 0,
          "no causality violations left to repair: %r" % rep["clock"]["violations_repaired"])
    events = read_events_csv(evcsv)
    for rank in (0, 1):
        truth = []
        with open("%s-rank-%d.txt" % (prefix, rank)) as f:
            for line in f:
                b, e = line.split()
                truth.append((int(b), int(e)))
        bars = [e for e in events if int(e["rank"]) == rank and e["op"] == "MPI_Barrier"]
        check(len(bars) == len(truth), "rank %d: %d barrier events, program made %d"
              % (rank, len(bars), len(truth)))
        worst = 0
        for ev, (tb, te) in zip(bars, truth):
            b, e = int(ev["t_begin_ns"]), int(ev["t_end_ns"])
            # The wrapper's stamps lie inside the program's bracket on the true clock.
            err = max(tb - b, b - te, tb - e, e - te, 0)
            worst = max(worst, err)
        check(worst <= 10000, "rank %d: aligned events within 10 us of truth (worst %d ns)"
              % (rank, worst))


def case_threads(a, tmp):
    rundir = os.path.join(tmp, "run")
    prog = program("cs_test_threads")
    p = commscope_run(rundir, MPIRUN + ["-np", "2", prog, "4", "300"])
    expected = self_reported_ops(p.stdout, "threads")
    rep = load_report(rundir)
    check_trace_complete(rep, 2)
    compare_ops(expected, rep)
    # Four duplicated communicators, each seen with its all-reduces.
    comms = {o["comm"] for o in rep["ops"] if o["op"] == "MPI_Allreduce"}
    check(len(comms) == 4, "all-reduces on 4 distinct communicators: %r" % comms)
    check(rep["instances"]["incomplete"] == 0, "instances %r" % rep["instances"])


def case_all_ops(a, tmp):
    """Every intercepted function once or more: exact calls and bytes per op against what the
    program computed from its own arguments; every instance matched; split communicators."""
    rundir = os.path.join(tmp, "run")
    prefix = os.path.join(tmp, "expect")
    prog = program("cs_test_allops")
    commscope_run(rundir, MPIRUN + ["-np", str(a.np), prog, prefix])
    expected = {}
    for r in range(a.np):
        with open("%s-rank-%d.txt" % (prefix, r)) as f:
            for name, (c, b) in self_reported_ops(f.read(), "").items():
                oc, ob = expected.get(name, (0, 0))
                expected[name] = (oc + c, ob + b)
    check(len(expected) >= 50, "program used %d distinct calls" % len(expected))
    rep = load_report(rundir)
    check_trace_complete(rep, a.np)
    compare_ops(expected, rep)
    check(rep["instances"]["incomplete"] == 0, "instances %r" % rep["instances"])
    allr = {o["comm"]: o for o in rep["ops"] if o["op"] == "MPI_Allreduce"}
    # world, dup, split_type (one host), create, and the two halves of the split.
    sizes = sorted(o["comm_size"] for o in allr.values())
    want = sorted([a.np] * 4 + [(a.np + 1) // 2, a.np // 2])
    check(sizes == want, "all-reduce communicator sizes %r, expected %r" % (sizes, want))


def case_inert(a, tmp):
    """The collector does nothing in processes that never call MPI_Init (mpirun, orted, hostname)."""
    outdir = os.path.join(tmp, "out")
    pre = os.path.join(LIB, "mpich" if MPICH else "", "libcommscope_mpi.so")
    env = {"COMMSCOPE_DIR": outdir, "LD_PRELOAD": pre}
    # Open MPI passes variables on with -x; MPICH's hydra passes the whole environment.
    pass_env = [] if MPICH else ["-x", "LD_PRELOAD", "-x", "COMMSCOPE_DIR"]
    p = run(MPIRUN + ["-np", "2"] + pass_env + ["hostname"], env=env)
    check(p.returncode == 0, "hostname under the collector exits 0 (%d): %s"
          % (p.returncode, p.stderr[-1000:]))
    host = os.uname().nodename
    check(p.stdout.split() == [host, host], "output unchanged: %r" % p.stdout)
    check("commscope" not in p.stderr, "no collector messages: %r" % p.stderr[-500:])
    check(not os.path.exists(outdir), "no run directory was created")
    # Also through the launcher: a plain non-MPI program runs, its status comes back, no traces.
    rundir = os.path.join(tmp, "run")
    q = run([COMMSCOPE, "run", "-o", rundir, "--no-analyze", "--", "sh", "-c", "echo hi; exit 3"])
    check(q.returncode == 3, "exit status propagated: %d" % q.returncode)
    check(q.stdout.strip() == "hi", "program output: %r" % q.stdout)
    check(glob.glob(os.path.join(rundir, "rank-*.cst")) == [], "no traces for a non-MPI program")


def case_gather(a, tmp):
    """Each rank writes its trace in its own local directory; MPI_Finalize brings them to rank 0."""
    rundir = os.path.join(tmp, "run")
    local = os.path.join(tmp, "local-%r")
    env = {"COMMSCOPE_LOCAL_DIR": local}
    p = commscope_run(rundir, MPIRUN + ["-np", "3", TRAIN, "--steps", "4"], env=env)
    for r in range(3):
        check(os.path.exists(os.path.join(tmp, "local-%d" % r, "rank-%05d.cst" % r)),
              "rank %d wrote locally" % r)
        check(os.path.exists(os.path.join(rundir, "rank-%05d.cst" % r)),
              "rank %d's trace gathered into the run directory" % r)
    rep = load_report(rundir)
    check_trace_complete(rep, 3)
    compare_ops(self_reported_ops(p.stdout, "cs_train"), rep)
    idx = read_index(rundir)
    check([(r, w) for r, _, _, w in idx] == [(r, "gathered") for r in range(3)],
          "traces.index: every trace gathered: %r" % idx)

    # COMMSCOPE_GATHER=never: the traces stay where the ranks wrote them, traces.index says
    # where, and the analysis reads them there.
    rundir = os.path.join(tmp, "kept")
    local = os.path.join(tmp, "kept-%r")
    p = commscope_run(rundir, MPIRUN + ["-np", "3", TRAIN, "--steps", "4"],
                      env={"COMMSCOPE_LOCAL_DIR": local, "COMMSCOPE_GATHER": "never"})
    check(not glob.glob(os.path.join(rundir, "rank-*.cst")), "no trace moved into the run directory")
    idx = read_index(rundir)
    want = [(r, os.path.join(tmp, "kept-%d" % r, "rank-%05d.cst" % r), "local") for r in range(3)]
    check([(r, path, w) for r, _, path, w in idx] == want, "traces.index: %r" % idx)
    rep = load_report(rundir)
    check_trace_complete(rep, 3)
    compare_ops(self_reported_ops(p.stdout, "cs_train"), rep)
    # A trace that cannot be read where the index says: the problem names its host and path.
    os.rename(os.path.join(tmp, "kept-1"), os.path.join(tmp, "moved-1"))
    q = run([COMMSCOPE, "analyze", rundir, "--quiet", "--json", os.path.join(tmp, "k.json")],
            check_rc=1)
    with open(os.path.join(tmp, "k.json")) as f:
        rep = json.load(f)
    host = idx[1][1]
    check(rep["trace"]["missing_ranks"] == [1] and any(
        "rank 1's trace stayed on host %s at %s" % (host, want[1][1]) in x
        for x in rep["trace"]["problems"]), "rank 1 missing, and where it stayed: %r"
        % rep["trace"]["problems"])
    check("rank 1's trace stayed on host" in q.stderr, "the problem on stderr too")

    # A bad value: one warning, and the default (auto: 3 ranks are gathered).
    rundir = os.path.join(tmp, "bad")
    p = commscope_run(rundir, MPIRUN + ["-np", "3", TRAIN, "--steps", "4"],
                      env={"COMMSCOPE_LOCAL_DIR": os.path.join(tmp, "bad-%r"),
                           "COMMSCOPE_GATHER": "sometimes"})
    check('COMMSCOPE_GATHER="sometimes" is not auto, always or never' in p.stderr,
          "the bad value is named")
    check(len(glob.glob(os.path.join(rundir, "rank-*.cst"))) == 3, "and the traces gathered")


def read_index(rundir):
    """RUN_DIR/traces.index as (rank, host, path, where) rows."""
    rows = []
    with open(os.path.join(rundir, "traces.index")) as f:
        for line in f:
            if line.startswith("#"):
                continue
            r, host, path, size, nonce, where = line.rstrip("\n").split("\t")
            check(int(size) > 0 and len(nonce) == 16, "index line %r" % line)
            rows.append((int(r), host, path, where))
    return rows


def case_launcher(a, tmp):
    rundir = os.path.join(tmp, "run")
    p = commscope_run(rundir, MPIRUN + ["-np", "2", TRAIN, "--steps", "3"])
    cfg = open(os.path.join(rundir, "commscope-run.txt")).read()
    check("LD_PRELOAD" in cfg and "COMMSCOPE_DIR" in cfg, "effective configuration written")
    check(os.path.exists(os.path.join(rundir, "report.json")), "report.json written")
    # A failing MPI program's status comes back through the launcher.
    rd2 = os.path.join(tmp, "run2")
    q = run([COMMSCOPE, "run", "-o", rd2, "--quiet", "--"] + MPIRUN
            + ["-np", "2", TRAIN, "--no-such-option"])
    check(q.returncode != 0, "failing program -> non-zero exit (%d)" % q.returncode)
    # An existing non-empty run directory is refused, not overwritten.
    r = run([COMMSCOPE, "run", "-o", rundir, "--", "true"])
    check(r.returncode != 0 and rundir in r.stderr, "existing run dir refused: %r" % r.stderr)
    u = run([COMMSCOPE, "run", "--bogus-flag", "--", "true"])
    check(u.returncode == 2 and "--bogus-flag" in u.stderr, "unknown option: %r" % u.stderr)
    # Text report on stdout when not quiet.
    rd3 = os.path.join(tmp, "run3")
    t = run([COMMSCOPE, "run", "-o", rd3, "--"] + MPIRUN + ["-np", "2", TRAIN, "--steps", "2"],
            check_rc=0)
    check("MPI_Allreduce" in t.stdout, "text report printed")


def case_bad_input(a, tmp):
    def expect_fail(args, needle, what):
        p = run([COMMSCOPE] + args)
        check(p.returncode != 0, "%s: non-zero exit (%d)" % (what, p.returncode))
        check(p.returncode < 128, "%s: no crash (%d)" % (what, p.returncode))
        check(needle in p.stderr, "%s: message mentions %r: %r" % (what, needle, p.stderr[-600:]))

    expect_fail(["analyze", os.path.join(tmp, "nope")], "nope", "missing directory")
    empty = os.path.join(tmp, "empty")
    os.mkdir(empty)
    expect_fail(["analyze", empty], "empty", "empty directory")
    expect_fail(["analyze", "--frobnicate", empty], "--frobnicate", "unknown option")
    expect_fail(["frobnicate"], "frobnicate", "unknown command")
    # A real run, then damage: a foreign file, a truncated file, a missing rank.
    rundir = os.path.join(tmp, "run")
    commscope_run(rundir, MPIRUN + ["-np", "3", TRAIN, "--steps", "2"], extra=["--no-analyze"])
    with open(os.path.join(rundir, "rank-00001.cst"), "r+b") as f:
        f.truncate(5000)
    os.remove(os.path.join(rundir, "rank-00002.cst"))
    js = os.path.join(tmp, "r.json")
    p = run([COMMSCOPE, "analyze", rundir, "--json", js, "--quiet"])
    check(p.returncode == 1, "damaged run: exit 1 (analysed with problems), got %d" % p.returncode)
    check("rank-00001.cst" in p.stderr and "truncated" in p.stderr,
          "truncation named: %r" % p.stderr[-800:])
    check("2" in p.stderr and "missing" in p.stderr, "missing rank named: %r" % p.stderr[-800:])
    with open(js) as f:
        rep = json.load(f)
    check(rep["trace"]["ranks_found"] == 1, "one rank analysed: %r" % rep["trace"])
    check(2 in rep["trace"]["missing_ranks"], "missing ranks %r" % rep["trace"]["missing_ranks"])
    check(len(rep["trace"]["problems"]) >= 2, "problems listed: %r" % rep["trace"]["problems"])
    foreign = os.path.join(tmp, "foreign")
    os.mkdir(foreign)
    with open(os.path.join(foreign, "rank-00000.cst"), "w") as f:
        f.write("this is not a trace\n" * 300)
    expect_fail(["analyze", foreign], "not a commscope trace", "foreign file")


def case_port_counters(a, tmp):
    """Port counters before and after the run, per node, on a saved sysfs tree
    (COMMSCOPE_SYSFS_ROOT): cs_test_portbump moves mlx5_0 port 1's counters by known amounts
    during the run; the report shows exactly these differences and zero for the other ports."""
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "sysfs", "node1")
    root = os.path.join(tmp, "sysfs")
    shutil.copytree(src, root)
    rundir = os.path.join(tmp, "run")
    commscope_run(rundir, MPIRUN + ["-np", "2", program("cs_test_portbump")],
                  env={"COMMSCOPE_SYSFS_ROOT": root})
    rep = load_report(rundir)
    hosts = rep["topology"]["hosts"]
    check(len(hosts) == 1 and hosts[0]["host"] == os.uname().nodename, "one host: %r" % hosts)
    check(hosts[0]["snapshot"] == "topology/%s.xml" % os.uname().nodename,
          "snapshot of the live machine: %r" % hosts[0]["snapshot"])
    ports = {(p["nic"], p["port"]): p for p in hosts[0]["port_counters"]}
    # Ports whose counters the saved tree has (mlx5_1 and mlx5_3 come without counter files).
    ib = os.path.join(root, "class", "infiniband")
    want_ports = sorted((d, 1) for d in os.listdir(ib)
                        if os.path.exists(os.path.join(ib, d, "ports", "1", "counters",
                                                       "port_xmit_data")))
    check(len(want_ports) >= 2 and sorted(ports) == want_ports,
          "every saved port with counters: %r vs %r" % (sorted(ports), want_ports))
    moved = {"xmit_bytes": 4000, "rcv_bytes": 10000, "symbol_errors": 3, "link_downed": 1}
    for key, p in ports.items():
        check(p["complete"], "%r has before and after" % (key,))
        for c in ("xmit_bytes", "rcv_bytes", "symbol_errors", "rcv_errors", "link_downed",
                  "xmit_discards"):
            want = moved.get(c, 0) if key == ("mlx5_0", 1) else 0
            check(p[c] == want, "%r %s difference %r, expected %d" % (key, c, p[c], want))
    text = run([COMMSCOPE, "analyze", rundir]).stdout
    check("port mlx5_0/1 over the run: xmit_bytes=4000 rcv_bytes=10000 symbol_errors=3" in text,
          "text report shows the differences")
    # The HTML report's hosts section: the port whose error counters moved is marked.
    with open(os.path.join(rundir, "report.html")) as f:
        page = f.read()
    check('<tr class="bad"><td>%s</td><td>mlx5_0/1</td><td>4000</td><td>10000</td><td>3</td>'
          '<td>0</td><td>1</td><td>0</td></tr>' % os.uname().nodename in page,
          "report.html marks mlx5_0/1 with its differences")
    others = [k for k in ports if k != ("mlx5_0", 1)]
    check(all('<tr><td>%s</td><td>%s/%d</td><td>0</td>' % (os.uname().nodename, n, q) in page
              for n, q in others), "report.html shows the other ports unmarked: %r" % others)


def case_node_snapshot_failures(a, tmp):
    """A missing or hanging snapshot helper costs a warning and the node's snapshot, nothing else:
    the job and its analysis still succeed, and the hanging helper (and what it started) is killed
    after COMMSCOPE_NODE_TIMEOUT."""
    slow = os.path.join(tmp, "slow.sh")
    with open(slow, "w") as f:
        f.write("#!/bin/sh\nsleep 120\n")
    os.chmod(slow, 0o755)
    for name, helper, words in (("missing", os.path.join(tmp, "nonexistent"), "No such file"),
                                ("hanging", slow, "did not finish within 1 s")):
        rundir = os.path.join(tmp, name)
        p = commscope_run(rundir, MPIRUN + ["-np", "2", TRAIN, "--steps", "2"],
                          env={"COMMSCOPE_NODE_HELPER": helper, "COMMSCOPE_NODE_TIMEOUT": "1"})
        check(words in p.stderr, "%s helper: warning %r in %r" % (name, words, p.stderr[-800:]))
        rep = load_report(rundir)
        check_trace_complete(rep, 2)
        h = rep["topology"]["hosts"]
        check(len(h) == 1 and h[0]["snapshot"] is None and "no topology snapshot" in h[0]["note"],
              "%s helper: host without snapshot: %r" % (name, h))


def case_fuzz(a, tmp):
    """Real collector traces as the seeds of the structure-aware fuzzer (tests/unit/test_fuzz.c):
    every MPI call kind (cs_test_allops), TP x DP with non-blocking gradient buckets (cs_train2d
    --overlap), a pipeline with split communicators (cs_test_pipeline) and all-to-all experts
    (cs_test_moe), a halo exchange (cs_test_halo), four threads under MPI_THREAD_MULTIPLE
    (cs_test_threads) and a job whose rank 1 is killed (cs_test_crash: a partial trace, blocks
    without CRC), each damaged in many ways with its CRCs made right again; the analysis must
    never crash, hang, print a non-finite number or write invalid JSON."""
    runs = []
    for name, np_, argv in (("allops", 3, [program("cs_test_allops"),
                                           os.path.join(tmp, "expect")]),
                            ("train2d", 4, [program("cs_train2d"), "--steps", "4",
                                            "--overlap"]),
                            ("pipeline", 4, [program("cs_test_pipeline"), "--pp", "2",
                                             "--steps", "4"]),
                            ("moe", 4, [program("cs_test_moe"), "--ep", "2", "--steps",
                                        "4"]),
                            ("halo", 4, [program("cs_test_halo")]),
                            ("threads", 2, [program("cs_test_threads"), "4", "300"]),
                            ("crash", 3, [program("cs_test_crash"), "25", "1"])):
        rundir = os.path.join(tmp, name)
        # (the crash job fails: rank 1 is killed and leaves a partial trace)
        commscope_run(rundir, MPIRUN + ["-np", str(np_)] + argv, extra=["--no-analyze"],
                      check_rc=None if name == "crash" else 0)
        runs.append(rundir)
    n = os.environ.get("CS_FUZZ_ITERATIONS", "300")
    p = run([os.path.join(BIN, "test_fuzz"), "-n", n] + runs, timeout=1500)
    print(p.stdout[-3000:])
    check(p.returncode == 0, "fuzzing real runs: exit %d\n%s\n%s"
          % (p.returncode, p.stdout[-6000:], p.stderr[-2000:]))


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--np", type=int, default=4)
    ap.add_argument("--overlap", action="store_true")
    ap.add_argument("--steps", type=int, default=3000)
    a = ap.parse_args()
    if not shutil.which(MPIRUN[0]):
        print("skip: %s not found" % MPIRUN[0])
        return 77
    for p in (COMMSCOPE, TRAIN):
        if not os.access(p, os.X_OK):
            print("FAIL: %s not built" % p, file=sys.stderr)
            return 1
    tmp = tempfile.mkdtemp(prefix="cs-mpi-")
    try:
        CASES[a.case](a, tmp)
    finally:
        if not failures:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("kept", tmp, file=sys.stderr)
    if failures:
        print("%d checks failed" % len(failures), file=sys.stderr)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
