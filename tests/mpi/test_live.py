#!/usr/bin/env python3
"""Live metrics of a running job (`commscope run --metrics FILE`, docs/metrics.md "Live
metrics"): 4 ranks of cs_train with step markers, rank 2 computing 4 times as long.

  metrics  the file, read while the job runs, parses as Prometheus text (every sample declared by
           HELP and TYPE, well-formed labels and values) and names rank 2 as the rank the others
           wait for (the waiting it caused grows most over 5 steps); at the end it holds the program's step count, the report's communication
           time and calls per rank, every rank down, and waits that the caused waits add up to;
           under Slurm (SLURM_JOB_ID) every sample carries the job label
  metrics_silent  a rank that froze (SIGSTOP) is down in the file while the others are up

Usage: test_live.py CASE; the environment as for test_mpi.py (whose helpers this uses).
Exit 0 pass, 1 fail, 77 skip.
"""
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_mpi as h  # noqa: E402

check = h.check
NP = 4
SLOW = 2
STEPS = 80

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(?:\{((?:%s)(?:,%s)*)?\})? (\S+)$" % (NAME, LABEL, LABEL))


def parse(text):
    """Prometheus text exposition -> {name: [(labels dict, value)]}; raises ValueError naming the
    line that breaks the format (a sample before its TYPE, a bad label or value, a type other
    than counter or gauge, a counter below 0)."""
    types, out = {}, {}
    for n, line in enumerate(text.split("\n"), 1):
        if not line:
            continue
        if line.startswith("# HELP "):
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[3] not in ("counter", "gauge"):
                raise ValueError("line %d: bad TYPE: %r" % (n, line))
            types[parts[2]] = parts[3]
            continue
        if line.startswith("#"):
            raise ValueError("line %d: unknown comment: %r" % (n, line))
        m = SAMPLE.match(line)
        if not m:
            raise ValueError("line %d: not a sample: %r" % (n, line))
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name not in types:
            raise ValueError("line %d: %s has no TYPE before it" % (n, name))
        if math.isnan(value) or (types[name] == "counter" and value < 0):
            raise ValueError("line %d: bad value for a %s: %r" % (n, types[name], line))
        lab = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', labels))
        out.setdefault(name, []).append((lab, value))
    if not text.endswith("\n"):
        raise ValueError("the exposition does not end with a newline")
    return out


def per_rank(m, name):
    return {int(lab["rank"]): v for lab, v in m.get(name, [])}


def case_metrics(tmp):
    rundir = os.path.join(tmp, "run")
    prom = os.path.join(tmp, "live.prom")
    argv = [h.COMMSCOPE, "run", "-o", rundir, "--quiet", "--metrics", prom, "--"] + h.MPIRUN + \
        ["-np", str(NP), h.TRAIN, "--steps", str(STEPS), "--steps-marker", "--slow-rank",
         str(SLOW), "--slow-factor", "4"]
    env = dict(os.environ, SLURM_JOB_ID="4242")
    p = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # Two reads while the job runs: the first once some waiting is judged and 3 steps are done,
    # the second 5 steps later; between them (past the start-up, whose waits go to whichever
    # rank started last) the waiting is rank 2's doing.
    first, live, deadline, seen = None, None, time.time() + 120, 0
    while time.time() < deadline and p.poll() is None:
        time.sleep(0.2)
        try:
            with open(prom) as f:
                text = f.read()
        except FileNotFoundError:
            continue
        try:
            m = parse(text)
        except ValueError as e:
            check(False, "live: the file parses as Prometheus text: %s" % e)
            break
        seen += 1
        caused = per_rank(m, "commscope_caused_wait_seconds_total")
        steps = sum(v for _, v in m.get("commscope_steps_total", []))
        if first is None and caused and max(caused.values()) > 0 and steps >= 3:
            first, first_steps = m, steps
        elif first is not None and steps >= first_steps + 5:
            live = m
            break
    out, err = p.communicate(timeout=150)
    check(p.returncode == 0, "the job exits 0: %d %s" % (p.returncode, err[-800:]))
    check(live is not None, "live: the file showed waiting while the job ran (%d reads): %s"
          % (seen, err[-600:]))
    if live:
        c0 = per_rank(first, "commscope_caused_wait_seconds_total")
        c1 = per_rank(live, "commscope_caused_wait_seconds_total")
        grew = {r: c1[r] - c0.get(r, 0) for r in c1}
        check(max(grew, key=grew.get) == SLOW,
              "live: rank %d is the one the others wait for: %r (from %r)" % (SLOW, grew, c0))
        up = per_rank(live, "commscope_rank_up")
        check(up == {r: 1 for r in range(NP)}, "live: every rank up: %r" % up)
        for name, samples in live.items():
            check(all(lab.get("job") == "4242" for lab, _ in samples),
                  "live: %s carries the Slurm job label: %r" % (name, samples[:2]))
    with open(prom) as f:
        final = parse(f.read())
    with open(os.path.join(rundir, "report.json")) as f:
        rep = json.load(f)
    steps = [v for _, v in final.get("commscope_steps_total", [])]
    check(steps == [STEPS], "final: the program's %d steps: %r" % (STEPS, steps))
    comm = per_rank(final, "commscope_comm_seconds_total")
    calls = per_rank(final, "commscope_calls_total")
    for r in rep["ranks"]:
        k = r["rank"]
        check(k in comm and abs(comm[k] - r["comm_s"]) <= 1e-8 * r["comm_s"] + 1e-9,
              "final: rank %d communication %r s, the report's %r" % (k, comm.get(k), r["comm_s"]))
        check(calls.get(k) == r["calls"], "final: rank %d calls %r, the report's %r"
              % (k, calls.get(k), r["calls"]))
    wait = per_rank(final, "commscope_wait_seconds_total")
    caused = per_rank(final, "commscope_caused_wait_seconds_total")
    check(abs(sum(wait.values()) - sum(caused.values())) <= 1e-6 * sum(wait.values()) + 1e-6,
          "final: the caused waits add up to the waits: %r %r" % (wait, caused))
    check(min(wait, key=wait.get) == SLOW and max(caused, key=caused.get) == SLOW,
          "final: rank %d waits least and causes most: %r %r" % (SLOW, wait, caused))
    check(per_rank(final, "commscope_rank_up") == {r: 0 for r in range(NP)},
          "final: every rank down (its trace closed): %r" % final.get("commscope_rank_up"))
    check(per_rank(final, "commscope_dropped_events_total") == {r: 0 for r in range(NP)} and
          all(set(lab) == {"job", "rank"} for lab, _ in final["commscope_dropped_events_total"]),
          "final: nothing dropped, labelled by rank: %r" % final.get("commscope_dropped_events_total"))
    bw = {(lab["comm"], lab["op"]): v for lab, v in
          final.get("commscope_busbw_gbytes_per_second", [])}
    check(bw.get(("world", "MPI_Allreduce"), 0) > 0, "final: all-reduce bus bandwidth: %r" % bw)
    with open(os.path.join(rundir, "commscope-run.txt")) as f:
        check("metrics: %s" % prom in f.read(), "the run file names the metrics file")


def case_metrics_silent(tmp):
    """A rank that froze (cs_test_hang freeze: SIGSTOP, its collector's thread too) while the
    others wait in MPI_Allreduce: the metrics file shows it down, its report age growing, and the
    others up.  (Open MPI: its mpirun wakes a stopped rank to end it.)"""
    rundir = os.path.join(tmp, "run")
    prom = os.path.join(tmp, "live.prom")
    argv = [h.COMMSCOPE, "run", "-o", rundir, "--quiet", "--metrics", prom, "--no-analyze",
            "--", "timeout", "-s", "TERM", "60"] + h.MPIRUN + \
        ["-np", str(NP), h.program("cs_test_hang"), "freeze"]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got, deadline = None, time.time() + 40
    try:
        while time.time() < deadline and p.poll() is None:
            time.sleep(0.2)
            try:
                with open(prom) as f:
                    m = parse(f.read())
            except (FileNotFoundError, ValueError):
                continue
            up = per_rank(m, "commscope_rank_up")
            if up == {0: 1, 1: 0, 2: 1, 3: 1}:
                got = m
                break
    finally:
        for pid in [int(x) for x in subprocess.run(["pgrep", "-f", "cs_test_hang freeze"],
                                                   capture_output=True, text=True).stdout.split()]:
            for sig in (18, 9):  # SIGCONT, SIGKILL: never leave a stopped rank behind
                try:
                    os.kill(pid, sig)
                except OSError:
                    pass
        p.communicate(timeout=60)
    check(got is not None, "rank 1 down, the others up, while the job hung: %s" % (
        got and got.get("commscope_rank_up")))
    if got:
        age = per_rank(got, "commscope_rank_report_age_seconds")
        check(age[1] > 2 and all(age[r] < age[1] for r in (0, 2, 3)),
              "rank 1's report age is the oldest: %r" % age)


CASES = {n[5:]: f for n, f in globals().items() if n.startswith("case_")}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print("usage: test_live.py {%s}" % ",".join(sorted(CASES)), file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="cs-live-") as tmp:
        CASES[sys.argv[1]](tmp)
    return 1 if h.failures else 0


if __name__ == "__main__":
    sys.exit(main())
