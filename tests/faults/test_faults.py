#!/usr/bin/env python3
"""The fault-injection suite (label `faults`; docs/reliability.md lists the cases).

commscope promises never to crash, hang or change the job it observes, whatever the disk, the
limits or the MPI, and to meet bad input with a clear error.  Each case here does one unkind thing
to a real Open MPI job (cs_fault_job, which counts its own calls and prints its results) or to
the analysis, and checks:
  - the job's exit status and printed results are those of the same job without commscope;
  - the trace keeps what the program counted: events recorded plus events counted as dropped
    equal its calls (or, for a killed rank, at least the calls it finished);
  - what commscope says about it (the message), and that the analysis ends with 0, 1 or 3,
    never by a signal.

Cases that need root (a small tmpfs) skip without it.

usage: test_faults.py CASE; CS_BIN and CS_LIB name the build's bin/ and lib/ folders.
Exit 0 pass, 1 fail, 77 skip.
"""
import glob
import json
import os
import pty
import random
import re
import resource
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

BIN = os.environ.get("CS_BIN", "")
LIB = os.environ.get("CS_LIB", "")
COMMSCOPE = os.path.join(BIN, "commscope")
JOB = os.path.join(BIN, "cs_fault_job")
MPIRUN = ["mpirun", "--oversubscribe", "--mca", "btl_vader_single_copy_mechanism", "none"]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def skip(why):
    print("SKIP:", why)
    sys.exit(77)


def run(cmd, env=None, timeout=240, limits=None):
    e = dict(os.environ)
    e.update(env or {})

    def pre():
        for res, val in (limits or {}).items():
            resource.setrlimit(res, (val, val))

    return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=pre if limits else None)


def results(stdout):
    """The job's printed results, {rank: result}."""
    return {int(m.group(1)): m.group(2)
            for m in re.finditer(r"fault_job: rank (\d+) result=([-0-9.]+)", stdout, re.M)}


def counted(stdout):
    """The calls the job counted, summed over the ranks: {op: calls}."""
    out = {}
    for m in re.finditer(r"fault_job: rank \d+ op (\S+) calls=(\d+)", stdout, re.M):
        out[m.group(1)] = out.get(m.group(1), 0) + int(m.group(2))
    return out


def job(np_, *args):
    return MPIRUN + ["-np", str(np_), JOB] + [str(a) for a in args]


def baseline(argv, limits=None):
    """The job without commscope."""
    return run(argv, limits=limits)


def traced(rundir, argv, extra=None, env=None, limits=None, analyze=True):
    cmd = [COMMSCOPE, "run", "-o", rundir, "--quiet"] + (extra or [])
    if not analyze:
        cmd.append("--no-analyze")
    return run(cmd + ["--"] + argv, env=env, limits=limits)


def run_file(rundir):
    kv = {}
    try:
        with open(os.path.join(rundir, "commscope-run.txt")) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition(": ")
                kv[k] = v
    except OSError:
        pass
    return kv


def analyze(rundir, extra=None, limits=None, timeout=240, out=None):
    out = out or rundir.rstrip("/") + "-report.json"
    p = run([COMMSCOPE, "analyze", rundir, "--quiet", "--json", out] + (extra or []),
            limits=limits, timeout=timeout)
    check(p.returncode in (0, 1, 3, 4), "analysis of %s ended with %d (a signal?): %s"
          % (rundir, p.returncode, p.stderr[-800:]))
    rep = None
    if p.returncode in (0, 1, 4) and os.path.exists(out):
        with open(out) as f:
            rep = json.load(f)
    return p, rep


def op_calls(rep):
    tot = {}
    for o in rep["ops"]:
        tot[o["op"]] = tot.get(o["op"], 0) + o["calls"]
    return tot


def same_job(base, got, what):
    """Exit status and results of the job the same with and without commscope (got: `commscope
    run --no-analyze`, whose status is the program's)."""
    check(got.returncode == base.returncode, "%s: the job's exit status %d under commscope, %d "
          "without" % (what, got.returncode, base.returncode))
    check(results(got.stdout) == results(base.stdout) and results(base.stdout),
          "%s: results %r under commscope, %r without" % (what, results(got.stdout),
                                                          results(base.stdout)))


def kept_all(rep, stdout, what):
    """Events recorded (in the kept window, and outside it in the whole-run totals of a ring-mode
    trace) plus counted as dropped equal the calls the job counted (every call it counts is one
    the collector records)."""
    want = counted(stdout)
    recorded = rep["trace"]["events"] + rep["trace"]["outside_events"]
    dropped = rep["trace"]["dropped_events"]
    check(recorded + dropped == sum(want.values()),
          "%s: %d events recorded + %d counted as dropped, the job made %d calls (%r)"
          % (what, recorded, dropped, sum(want.values()), want))
    return recorded, dropped


def op_bytes(rep):
    tot = {}
    for o in rep["ops"]:
        tot[o["op"]] = tot.get(o["op"], 0) + o["bytes"]
    return tot


def tmpfs(tmp, mb):
    if os.geteuid() != 0:
        skip("needs root for a small tmpfs")
    d = os.path.join(tmp, "small")
    os.mkdir(d)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=%dm" % mb, "tmpfs", d]).returncode:
        skip("cannot mount a tmpfs")
    return d


def umount(d):
    subprocess.run(["umount", "-l", d])


# ---- storage -----------------------------------------------------------------------------------

def case_disk_full(tmp):
    """The run directory on a 24 MiB disk; 600,000 calls on each of 2 ranks (77 MB of trace): the
    disk fills mid-run.  Each rank says so once; in ring mode (the default) its trace goes on over
    the space it has, keeping the newest events, its totals counting the rest; in head mode it
    stops recording and counts what it could not record.  The job ends as it would without
    commscope."""
    argv = job(2, "--calls", 600000)
    base = baseline(argv)
    d = tmpfs(tmp, 24)
    try:
        for mode in ("ring", "head"):
            rundir = os.path.join(d, "run-" + mode)
            p = traced(rundir, argv, env={"COMMSCOPE_TRACE_MODE": mode}, analyze=False)
            what = "disk full (%s)" % mode
            same_job(base, p, what)
            check("recording stopped" in p.stderr and "No space left on device" in p.stderr,
                  "%s: the warning says so: %r" % (what, p.stderr[-600:]))
            q, rep = analyze(rundir, out=os.path.join(tmp, "report-%s.json" % mode))
            check(q.returncode == 1 and rep is not None, "%s: analysed with problems (%d)"
                  % (what, q.returncode))
            if not rep:
                continue
            rec, dropped = kept_all(rep, p.stdout, what)
            t = rep["trace"]
            if mode == "ring":
                check(dropped == 0 and t["window_ranks"] == 2 and t["outside_events"] > 0,
                      "%s: nothing dropped, the newest events kept: %r" % (what, t))
                check(op_calls(rep).get("MPI_Allreduce") == 2 * 600000,
                      "%s: the ops table counts every all-reduce: %r" % (what, op_calls(rep)))
                check(any("could not grow past a storage fault" in x for x in t["problems"]),
                      "%s: the report names the storage fault: %r" % (what, t["problems"]))
            else:
                check(dropped > 0 and rec > 0, "%s: some recorded (%d), some dropped (%d)"
                      % (what, rec, dropped))
                check(any("storage fault" in x for x in t["problems"]),
                      "%s: the report names the storage fault: %r" % (what, t["problems"]))
            shutil.rmtree(rundir, ignore_errors=True)
    finally:
        umount(d)


def case_fsize_limit(tmp):
    """ulimit -f of 8 MiB (the job writes 77 MB of trace): no SIGXFSZ reaches the job, each trace
    stays below the limit and counts the rest as dropped."""
    limit = 8 << 20
    argv = job(2, "--calls", 600000)
    lim = {resource.RLIMIT_FSIZE: limit}
    base = baseline(argv, limits=lim)
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, argv, limits=lim, analyze=False)
    same_job(base, p, "file-size limit")
    check("by the file-size limit" in p.stderr, "file-size limit: the warning: %r"
          % p.stderr[-600:])
    sizes = [os.path.getsize(f) for f in glob.glob(os.path.join(rundir, "rank-*.cst"))]
    check(len(sizes) == 2 and all(0 < s <= limit for s in sizes),
          "file-size limit: traces below %d bytes: %r" % (limit, sizes))
    q, rep = analyze(rundir)
    if check(rep is not None, "file-size limit: analysed (%d): %s" % (q.returncode, q.stderr)):
        kept_all(rep, p.stdout, "file-size limit")


def case_ring_long(tmp):
    """A long job with a small cap (ring mode, the default): 2 ranks, 200,000 all-reduces and a
    step marker every 10, into 2 MiB traces that hold about 30,000 events.  The job is unchanged;
    the report's whole-run totals are the program's own call and byte counts; the kept window is
    the last part of the run; the steps of the whole run are counted."""
    argv = job(2, "--calls", 200000, "--step-every", 10)
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, argv, env={"COMMSCOPE_MAX_MB": "2"}, analyze=False)
    same_job(base, p, "ring")
    q, rep = analyze(rundir)
    if not check(rep is not None, "ring: analysed (%d): %s" % (q.returncode, q.stderr[-400:])):
        return
    want = counted(p.stdout)
    t = rep["trace"]
    check(q.returncode == 0 and not t["problems"],
          "ring: a window is no problem: exit %d, %r" % (q.returncode, t["problems"]))
    check(t["window_ranks"] == 2 and t["outside_events"] > 0 and t["dropped_events"] == 0,
          "ring: both ranks kept a window, nothing dropped: %r" % t)
    check(rep["instances"]["incomplete"] == 0 and rep["instances"]["matched"] > 0,
          "ring: the window holds whole collectives: %r" % rep["instances"])
    kept_all(rep, p.stdout, "ring")
    calls = op_calls(rep)
    check(calls.get("MPI_Allreduce") == want["MPI_Allreduce"] == 400000 and
          calls.get("MPI_Barrier") == want["MPI_Barrier"],
          "ring: the ops table's calls are the job's: %r, the job: %r" % (calls, want))
    check(op_bytes(rep).get("MPI_Allreduce") == 8 * 400000,
          "ring: all-reduce bytes %r, the job sent %d" % (op_bytes(rep), 8 * 400000))
    wall = max(r["wall_s"] for r in rep["ranks"])
    check(t["window_start_s"] > 0.5 * wall,
          "ring: the window is the end of the run: it starts at %.3f s of %.3f s"
          % (t["window_start_s"], wall))
    s = rep["steps"]
    check(s["source"] == "marker" and s["run_count"] == want["MPI_Pcontrol"] // 2 and
          0 < s["count"] < s["run_count"],
          "ring: %r steps in the window, %r in the whole run; the job marked %d"
          % (s["count"], s["run_count"], want["MPI_Pcontrol"] // 2))


def case_ring_kill(tmp):
    """kill -9 of every rank half way through 60,000 all-reduces, with 1 MiB traces (about 14,000
    events): what each rank did up to the kill is in its totals and its window."""
    rundir = os.path.join(tmp, "run")
    traced(rundir, job(3, "--calls", 60000, "--kill", -1), env={"COMMSCOPE_MAX_MB": "1"},
           analyze=False)
    q, rep = analyze(rundir)
    if check(rep is not None, "ring kill: analysed (%d): %s" % (q.returncode, q.stderr[-400:])):
        check(sorted(rep["trace"]["partial_ranks"]) == [0, 1, 2] and
              rep["trace"]["window_ranks"] == 3, "ring kill: all partial, all windows: %r"
              % rep["trace"])
        got = op_calls(rep).get("MPI_Allreduce", 0)
        check(got == 3 * 30000, "ring kill: %d all-reduces counted, the ranks finished %d"
              % (got, 3 * 30000))


def case_report_fsize(tmp):
    """The analysis under a file-size limit smaller than its reports: exit 1, the file named, and
    neither a half-written report nor a temporary file left behind."""
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, job(2, "--calls", 30000), analyze=False)
    check(p.returncode == 0, "report limit: the job ran (%d)" % p.returncode)
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    js, html = os.path.join(out, "report.json"), os.path.join(out, "report.html")
    q = run([COMMSCOPE, "analyze", rundir, "--quiet", "--json", js, "--html", html],
            limits={resource.RLIMIT_FSIZE: 4096})
    check(q.returncode == 1, "report limit: exit 1, got %d" % q.returncode)
    check("report.json" in q.stderr and "File too large" in q.stderr,
          "report limit: the JSON report named with the reason: %r" % q.stderr[-500:])
    check(os.listdir(out) == [], "report limit: nothing left behind: %r" % os.listdir(out))


def case_vanished_dir(tmp):
    """Rank 0 removes the run directory half way: the job is unchanged; the collector says what
    it could not gather, and the analysis finds nothing to analyse."""
    rundir = os.path.join(tmp, "run")
    argv = job(2, "--calls", 20000, "--rmdir", rundir)
    base = baseline(job(2, "--calls", 20000))
    p = traced(rundir, argv, analyze=False)
    check(p.returncode == base.returncode, "vanished directory: exit %d, without %d"
          % (p.returncode, base.returncode))
    check(results(p.stdout) == results(base.stdout), "vanished directory: results %r, %r"
          % (results(p.stdout), results(base.stdout)))
    check("no closed trace to gather" in p.stderr or "could not" in p.stderr,
          "vanished directory: the collector says what it could not gather: %r" % p.stderr[-600:])


# ---- the analysis on files that change or are no files ----------------------------------------

def case_live_analysis(tmp):
    """Analyses of a run directory while its job runs and while its ranks finalize (trim, close,
    gather): every one ends with 0, 1 or 3, never by a signal (a trace trimmed under a mapping was
    SIGBUS), and once the job is done the traces read complete."""
    rundir = os.path.join(tmp, "run")
    cmd = [COMMSCOPE, "run", "-o", rundir, "--quiet", "--no-analyze", "--"] + job(
        3, "--calls", 150000)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    n = 0
    while proc.poll() is None and n < 60:
        if glob.glob(os.path.join(rundir, "rank-*.cst")):
            p = run([COMMSCOPE, "analyze", rundir, "--quiet"], timeout=120)
            check(p.returncode in (0, 1, 3), "live analysis %d ended with %d: %s"
                  % (n, p.returncode, p.stderr[-400:]))
            n += 1
        else:
            time.sleep(0.02)
    out, err = proc.communicate(timeout=240)
    check(proc.returncode == 0, "live analysis: the job ran (%d): %s" % (proc.returncode, err))
    check(n >= 3, "live analysis: %d analyses while the job ran" % n)
    q, rep = analyze(rundir)
    if check(q.returncode == 0 and rep is not None, "live analysis: the finished run reads whole"):
        check(rep["trace"]["partial_ranks"] == [], "no partial ranks left: %r"
              % rep["trace"]["partial_ranks"])
        kept_all(rep, out, "live analysis")


def case_fifo(tmp):
    """A FIFO named rank-00001.cst: refused at once, never waited on."""
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, job(2, "--calls", 100), analyze=False)
    os.unlink(os.path.join(rundir, "rank-00001.cst"))
    os.mkfifo(os.path.join(rundir, "rank-00001.cst"))
    t0 = time.time()
    q = run([COMMSCOPE, "analyze", rundir, "--quiet"], timeout=30)
    check(time.time() - t0 < 20, "fifo: the analysis did not wait")
    check(q.returncode == 1 and "not a regular file but a FIFO" in q.stderr,
          "fifo: refused with a message (%d): %r" % (q.returncode, q.stderr[-400:]))


def case_analyze_signals(tmp):
    """SIGTERM and SIGINT end a long analysis within a second, with no temporary file left."""
    big = os.path.join(tmp, "big")
    r = run([os.path.join(BIN, "cs_bench_analyzer"), "-r", "32", "-e", "200000", "-n", "1",
             "-d", big, "-k"], timeout=300)
    check(r.returncode == 0, "signals: synthetic run written (%d): %s" % (r.returncode, r.stderr))
    out = os.path.join(tmp, "out")
    os.mkdir(out)
    for sig in (signal.SIGTERM, signal.SIGINT):
        proc = subprocess.Popen([COMMSCOPE, "analyze", big, "--quiet", "--json",
                                 os.path.join(out, "r.json"), "--events",
                                 os.path.join(out, "e.csv")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        time.sleep(0.5)
        t0 = time.time()
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        took = time.time() - t0
        check(took < 1.0 or proc.returncode == 0,
              "%s ended the analysis in %.2f s (status %r)" % (sig.name, took, proc.returncode))
        left = [f for f in os.listdir(out) if f.startswith(".")]
        check(left == [], "%s: no temporary file left: %r" % (sig.name, left))
        for f in os.listdir(out):
            os.unlink(os.path.join(out, f))


def case_ctrl_c(tmp):
    """Ctrl-C at a terminal (the terminal's SIGINT to the whole foreground group: commscope,
    mpirun, ranks) at eight moments from start-up to the end: each time commscope exits within
    60 s and nothing it started keeps the terminal open."""
    for i in range(8):
        rundir = os.path.join(tmp, "run%d" % i)
        delay = 0.2 + 0.45 * i
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(COMMSCOPE, [COMMSCOPE, "run", "-o", rundir, "--"] + job(2, "--calls", 400000))
        sent = None
        t0 = time.time()
        status = None
        while True:
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    d = os.read(fd, 65536)
                except OSError:
                    d = b""
                if not d:
                    break
            if sent is None and time.time() - t0 > delay:
                os.write(fd, b"\x03")
                sent = time.time()
            if status is None:
                w, st = os.waitpid(pid, os.WNOHANG)
                if w:
                    status = st
            if sent and time.time() - sent > 60:
                break
        # The terminal closed (or 60 s passed): commscope itself must be gone by then too.
        while status is None and time.time() - (sent or t0) < 60:
            w, st = os.waitpid(pid, os.WNOHANG)
            if w:
                status = st
            else:
                time.sleep(0.05)
        if status is None:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            check(False, "ctrl-c %d (%.1f s in): commscope did not exit within 60 s" % (i, delay))
        took = time.time() - (sent or t0)
        check(took < 60, "ctrl-c %d (%.1f s in): the terminal closed %.1f s after Ctrl-C"
              % (i, delay, took))
        os.close(fd)


# ---- traces of crashed ranks -------------------------------------------------------------------

def used_extent(data):
    """Bytes of the header and the claimed blocks (the rest of a partial file is zero)."""
    end = 4096
    for off in range(4096, len(data) - 16383, 16384):
        if struct.unpack_from("<I", data, off)[0] == 0x4b4c4243:
            end = off + 16384
    return end


def case_partial_flips(tmp):
    """300 random byte changes in the used part of a killed rank's trace: each is either found
    (the file skipped with the reason) or changes nothing in the report; none silently changes
    it (header CRC, sealed communicator records, the event block's running check)."""
    rundir = os.path.join(tmp, "run")
    # a 2 MiB cap keeps the partial files (which keep their reserve) small to read 300 times
    p = traced(rundir, job(3, "--calls", 300, "--kill", 1), analyze=False,
               env={"COMMSCOPE_MAX_MB": "2"})
    victim = os.path.join(rundir, "rank-00001.cst")
    with open(victim, "rb") as f:
        data = f.read()
    work = os.path.join(tmp, "work")
    shutil.copytree(rundir, work)
    q0, base = analyze(work)
    check(base is not None and 1 in base["trace"]["partial_ranks"],
          "flips: the killed rank's trace is partial: %r" % (base and base["trace"]))
    ref = json.dumps(base, sort_keys=True)
    rng = random.Random(2024)
    n = used_extent(data)
    found = same = 0
    for it in range(300):
        pos = rng.randrange(n)
        b = bytearray(data)
        b[pos] = rng.choice([x for x in range(256) if x != b[pos]])
        with open(os.path.join(work, "rank-00001.cst"), "wb") as f:
            f.write(b)
        q, rep = analyze(work)
        if "rank-00001.cst: " in q.stderr and "file skipped" in q.stderr:
            found += 1
        elif rep is not None and json.dumps(rep, sort_keys=True) == ref:
            same += 1
        else:
            check(False, "flip at byte %d (of %d used) changed the report silently: %s"
                  % (pos, n, q.stderr[-300:]))
    print("partial flips: %d found, %d harmless of 300" % (found, same))
    check(found > 0, "some flips were found")


def case_closed_damage(tmp):
    """Cuts and byte changes of a closed trace: each is found and named, never a crash."""
    rundir = os.path.join(tmp, "run")
    traced(rundir, job(2, "--calls", 3000), analyze=False)
    path = os.path.join(rundir, "rank-00001.cst")
    with open(path, "rb") as f:
        data = f.read()
    rng = random.Random(7)
    for it in range(60):
        b = bytearray(data)
        if it % 3 == 0:
            b = b[:rng.randrange(len(b))]
            what = "cut at %d" % len(b)
        else:
            pos = rng.randrange(len(b))
            b[pos] ^= 1 << rng.randrange(8)
            what = "bit flipped at %d" % pos
        with open(path, "wb") as f:
            f.write(b)
        q, _ = analyze(rundir)
        check(q.returncode in (1, 3) and "rank-00001.cst: " in q.stderr,
              "closed trace %s: found and named (%d): %r" % (what, q.returncode, q.stderr[-300:]))


def case_kill_one(tmp):
    """kill -9 of one rank half way: the job fails as it does without commscope; the killed
    rank's partial trace keeps every call it finished."""
    argv = job(3, "--calls", 20000, "--kill", 1)
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, argv, analyze=False)
    check(int(run_file(rundir).get("exit_status", -1)) == base.returncode,
          "kill one: exit status %s, without %d" % (run_file(rundir).get("exit_status"),
                                                     base.returncode))
    q, rep = analyze(rundir)
    if check(rep is not None, "kill one: analysed (%d): %s" % (q.returncode, q.stderr[-400:])):
        check(1 in rep["trace"]["partial_ranks"], "kill one: rank 1 partial: %r"
              % rep["trace"]["partial_ranks"])
        r1 = [r for r in rep["ranks"] if r["rank"] == 1]
        check(r1 and r1[0]["calls"] >= 10000, "kill one: rank 1 kept the %d all-reduces it "
              "finished before the kill: %r" % (10000, r1 and r1[0]["calls"]))


def case_kill_all(tmp):
    """kill -9 of every rank half way: every trace partial, every finished call kept."""
    rundir = os.path.join(tmp, "run")
    traced(rundir, job(3, "--calls", 20000, "--kill", -1), analyze=False)
    q, rep = analyze(rundir)
    if check(rep is not None, "kill all: analysed (%d): %s" % (q.returncode, q.stderr[-400:])):
        check(sorted(rep["trace"]["partial_ranks"]) == [0, 1, 2], "kill all: all partial: %r"
              % rep["trace"]["partial_ranks"])
        got = op_calls(rep).get("MPI_Allreduce", 0)
        check(got == 3 * 10000, "kill all: %d all-reduces kept, the ranks finished %d"
              % (got, 3 * 10000))


def case_launcher_signals(tmp):
    """SIGTERM and SIGINT (from kill, not a terminal) to `commscope run` go to the job, which
    ends; commscope returns its status and leaves an analysable run directory."""
    for sig in (signal.SIGTERM, signal.SIGINT):
        rundir = os.path.join(tmp, "run-%s" % sig.name)
        proc = subprocess.Popen([COMMSCOPE, "run", "-o", rundir, "--quiet", "--"]
                                + job(2, "--calls", 100000000),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        t0 = time.time()
        while time.time() - t0 < 30 and len(glob.glob(os.path.join(rundir, "rank-*.cst"))) < 2:
            time.sleep(0.05)
        time.sleep(0.5)
        proc.send_signal(sig)
        t1 = time.time()
        try:
            proc.communicate(timeout=90)
            print("%s: commscope run ended %.1f s after the signal" % (sig.name, time.time() - t1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            check(False, "%s: commscope run did not end within 90 s" % sig.name)
        check(proc.returncode != 0, "%s: the job's failure is the status (%d)"
              % (sig.name, proc.returncode))
        q, rep = analyze(rundir)
        check(rep is not None and rep["trace"]["ranks_found"] == 2,
              "%s: the run directory analyses (%d): %s" % (sig.name, q.returncode,
                                                           q.stderr[-300:]))


# ---- the program's own behaviour --------------------------------------------------------------

def exact(tmp, what, np_, *args):
    """The job with its unusual behaviour, without and with commscope: same status and results,
    every call recorded."""
    argv = job(np_, *args)
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    p = traced(rundir, argv, analyze=False)
    same_job(base, p, what)
    q, rep = analyze(rundir)
    if check(rep is not None, "%s: analysed (%d): %s" % (what, q.returncode, q.stderr[-400:])):
        want = counted(p.stdout)
        got = op_calls(rep)
        for op in ("MPI_Allreduce", "MPI_Barrier"):
            check(got.get(op) == want.get(op), "%s: %s calls %r, the job made %r"
                  % (what, op, got.get(op), want.get(op)))
        kept_all(rep, p.stdout, what)
        check(rep["trace"]["dropped_events"] == 0, "%s: nothing dropped" % what)
    return base, p, rep


def case_mpi_abort(tmp):
    """MPI_Abort(7) on rank 1: the same exit status as without commscope, the traces analysable."""
    argv = job(3, "--calls", 2000, "--abort", 1)
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    traced(rundir, argv, analyze=False)
    st = run_file(rundir).get("exit_status")
    check(st is not None and int(st) == base.returncode, "abort: exit status %s, without %d"
          % (st, base.returncode))
    q, rep = analyze(rundir)
    check(rep is not None, "abort: analysed (%d): %s" % (q.returncode, q.stderr[-300:]))


def case_fork_exec(tmp):
    exact(tmp, "fork and exec", 2, "--calls", 5000, "--fork")


def case_threads(tmp):
    exact(tmp, "MPI_THREAD_MULTIPLE", 2, "--calls", 8000, "--threads", 4)


def case_own_handlers(tmp):
    exact(tmp, "own signal handlers", 2, "--calls", 5000, "--handlers")


def case_no_finalize(tmp):
    """exit() without MPI_Finalize: the same status as without commscope; the traces stay
    partial, with every call."""
    argv = job(2, "--calls", 5000, "--no-finalize")
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    traced(rundir, argv, analyze=False)
    st = run_file(rundir).get("exit_status")
    check(st is not None and int(st) == base.returncode, "no finalize: exit status %s, without %d"
          % (st, base.returncode))
    q, rep = analyze(rundir)
    if check(rep is not None, "no finalize: analysed (%d): %s" % (q.returncode, q.stderr[-300:])):
        check(op_calls(rep).get("MPI_Allreduce") == 2 * 5000, "no finalize: every all-reduce "
              "kept: %r" % op_calls(rep).get("MPI_Allreduce"))


def case_double_finalize(tmp):
    argv = job(2, "--calls", 1000, "--double-finalize")
    base = baseline(argv)
    rundir = os.path.join(tmp, "run")
    traced(rundir, argv, analyze=False)
    st = run_file(rundir).get("exit_status")
    check(st is not None and int(st) == base.returncode,
          "double finalize: exit status %s, without %d" % (st, base.returncode))


# ---- MPI families and jobs commscope does not trace --------------------------------------------

def case_no_matching_collector(tmp):
    """An MPICH program, with a commscope that has only the Open MPI collector: none is preloaded
    (the Open MPI one made MPICH programs abort), the job runs unchanged, and commscope says which
    MPI it found and why it cannot trace it."""
    prog = os.path.join(BIN, "cs_train_mpich")
    if not shutil.which("mpirun.mpich") or not os.access(prog, os.X_OK):
        skip("no MPICH build (libmpich-dev)")
    libdir = os.path.join(tmp, "lib")
    os.mkdir(libdir)
    for name in ("libcommscope.so", "libcommscope_mpi.so"):
        shutil.copy(os.path.join(LIB, name), libdir)
    argv = ["mpirun.mpich", "-np", "2", prog, "--steps", "3"]
    base = run(argv)
    rundir = os.path.join(tmp, "run")
    p = run([COMMSCOPE, "run", "-o", rundir, "--"] + argv, env={"COMMSCOPE_LIBDIR": libdir})
    check(int(run_file(rundir).get("exit_status", -1)) == base.returncode == 0,
          "MPICH without its collector: the job ran as without commscope (%s, %d)"
          % (run_file(rundir).get("exit_status"), base.returncode))
    check("links MPICH (libmpich.so.12)" in p.stderr and "no MPI collector built for MPICH"
          in p.stderr, "MPICH: commscope says what it found: %r" % p.stderr[-600:])
    check(run_file(rundir).get("mpi_preload", "").startswith("no ("),
          "MPICH: nothing preloaded: %r" % run_file(rundir).get("mpi_preload"))
    check("preloaded no MPI collector" in p.stderr, "MPICH: the analysis repeats why: %r"
          % p.stderr[-400:])


def case_gloo(tmp):
    """torchrun with the gloo backend (Debian's torch): no MPI or NCCL call anywhere; each rank
    still leaves a trace saying so, and the analysis says the job communicated through something
    commscope does not intercept, with exit status 0."""
    torchrun = shutil.which("torchrun")
    if not torchrun:
        skip("no torchrun (python3-torch)")
    script = os.path.join(tmp, "gloo.py")
    with open(script, "w") as f:
        f.write("import torch, torch.distributed as dist\n"
                "dist.init_process_group('gloo')\n"
                "t = torch.ones(16) * dist.get_rank()\n"
                "for _ in range(10):\n"
                "    dist.all_reduce(t)\n"
                "print('gloo: rank %d result=%.1f' % (dist.get_rank(), float(t[0])))\n"
                "dist.destroy_process_group()\n")
    port = 20000 + os.getpid() % 20000
    argv = [torchrun, "--nproc_per_node=2", "--master_port=%d" % port, "--redirects", "1",
            "--tee", "1", script]
    rundir = os.path.join(tmp, "run")
    p = run([COMMSCOPE, "run", "-o", rundir, "--"] + argv, env={"OMP_NUM_THREADS": "1"})
    check(p.returncode == 0, "gloo: commscope run exits 0 (%d): %s" % (p.returncode,
                                                                      p.stderr[-800:]))
    check(len(glob.glob(os.path.join(rundir, "rank-*.cst"))) == 2, "gloo: a trace per rank")
    check("2 of the 2 ranks made no MPI or NCCL call" in p.stdout
          and "does not intercept" in p.stdout, "gloo: the verdict says so: %r" % p.stdout[:900])
    check("no rank-*.cst trace files" not in p.stderr, "gloo: no 'no trace files' failure")


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_faults.py CASE; cases: %s" % " ".join(sorted(CASES)), file=sys.stderr)
        return 2
    if not shutil.which("mpirun"):
        skip("mpirun not found")
    tmp = tempfile.mkdtemp(prefix="cs-faults-")
    try:
        CASES[sys.argv[1]](tmp)
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
