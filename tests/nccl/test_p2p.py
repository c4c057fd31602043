#!/usr/bin/env python3
"""NCCL point-to-point matched across ranks, end to end without a GPU: tests/nccl/nccl_pipeline.c
(pipeline stages: single ncclSend/ncclRecv launches forward, grouped send+recv backward) on the
CPU NCCL and the fake CUDA runtime and CUPTI (tests/fakes/), NP processes launched without MPI
under LD_PRELOAD=libcommscope.so, then `commscope analyze`.

Checks: every channel (sender, receiver) of the report's `nccl_p2p` with exactly the calls and
bytes the program issued, every pair matched and timed on the GPU, no unmatched call; the late
sender / late receiver counts and waits equal to those computed here independently from the
aligned events (--events): pairs formed per (communicator, sender, receiver) in issue order, each
side's arrival the start of the first NCCL kernel of its launch; each rank's waiting on its GPU
timeline (the report's segments) equal to the exposed NCCL kernel time inside its point-to-point
waiting intervals, recomputed from the events.  With ncclGroupEnd as the step
marker (COMMSCOPE_STEP_MARKER), the GPU what-if replays the steps on the GPU timelines with the
send/recv kernels linked: within 5 % of the measured step, no dependency cycle cut.

Usage: test_p2p.py [--np N]; CS_BIN, CS_LIB, CS_TESTBIN, CS_FAKE_CUPTI from ctest.
Exit 0 pass, 1 fail.
"""
import collections
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_nccl as T  # noqa: E402

ITERS = 4


def pairs(rows):
    """(from, to) -> the channel's pairs in issue order, each (send side, receive side), a side
    (rank, (start, end) of the first NCCL kernel of its launch, or None)."""
    first = {}
    for row in rows:
        if row["op"] == "gpu_nccl" and int(row["request"]):
            key = (int(row["rank"]), int(row["request"]))
            b, e = int(row["t_begin_ns"]), int(row["t_end_ns"])
            if key not in first or b < first[key][0]:
                first[key] = (b, e)
    sides = collections.defaultdict(lambda: ([], []))  # (from, to) -> (sends, receives)
    for row in rows:
        if row["op"] not in ("ncclSend", "ncclRecv"):
            continue
        r, peer = int(row["rank"]), int(row["seq"])
        k = first.get((r, int(row["request"])))
        if row["op"] == "ncclSend":
            sides[(r, peer)][0].append((r, k))
        else:
            sides[(peer, r)][1].append((r, k))
    return {ch: list(zip(s, rv)) for ch, (s, rv) in sides.items()}


def expected_waits(rows, np_):
    """(late_sender, late_sender_wait_ns, late_receiver, late_receiver_wait_ns) per channel."""
    out = {}
    for ch, prs in pairs(rows).items():
        ls = lsw = lr = lrw = 0
        for (_, ks), (_, kr) in prs:
            if ks is None or kr is None:
                continue
            a_s, a_r = ks[0], kr[0]
            if a_s > a_r:
                ls, lsw = ls + 1, lsw + a_s - a_r
            elif a_r > a_s:
                lr, lrw = lr + 1, lrw + a_r - a_s
        out[ch] = (ls, lsw, lr, lrw)
    return out


def union(iv):
    """Sorted disjoint union of half-open intervals."""
    out = []
    for b, e in sorted(x for x in iv if x[1] > x[0]):
        if out and b <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([b, e])
    return out


def minus(a, b):
    """a - b for sorted disjoint interval lists."""
    out = []
    for x, y in a:
        cur = x
        for p, q in b:
            if q <= cur or p >= y:
                continue
            if p > cur:
                out.append([cur, p])
            cur = max(cur, q)
        if cur < y:
            out.append([cur, y])
    return out


def inter_len(a, b):
    return sum(max(0, min(y, q) - max(x, p)) for x, y in a for p, q in b)


def expected_gpu_waiting(rows, np_):
    """Per rank, the NCCL waiting on its GPU timeline over the run (docs/metrics.md, "Waiting
    on a GPU timeline"): the exposed part (no compute kernel running) of its NCCL kernels inside
    its point-to-point waiting intervals.  Each pair's side that arrived first waits from its
    arrival to the other's, at most to the end of its launch's first kernel.  The program uses
    one communicator, so no exposed instant is shared."""
    comp, nccl = collections.defaultdict(list), collections.defaultdict(list)
    for row in rows:
        r, b, e = int(row["rank"]), int(row["t_begin_ns"]), int(row["t_end_ns"])
        if row["op"] == "gpu_kernel":
            comp[r].append((b, e))
        elif row["op"] == "gpu_nccl":
            nccl[r].append((b, e))
    waits = collections.defaultdict(list)
    for prs in pairs(rows).values():
        for (rs, ks), (rr, kr) in prs:
            if ks is None or kr is None or ks[0] == kr[0]:
                continue
            (w, kw), ko = ((rs, ks), kr) if ks[0] < kr[0] else ((rr, kr), ks)
            waits[w].append((kw[0], min(ko[0], kw[1])))
    return {r: inter_len(union(waits[r]), minus(union(nccl[r]), union(comp[r])))
            for r in range(np_)}


def analyze(rundir):
    ev = os.path.join(rundir, "events.csv")
    js = os.path.join(rundir, "report.json")
    p = subprocess.run([os.path.join(T.BIN, "commscope"), "analyze", rundir, "--events", ev,
                        "--json", js], capture_output=True, text=True, timeout=60)
    T.check(p.returncode in (0, 1), "commscope analyze exit %d: %s" % (p.returncode,
                                                                       p.stderr[-2000:]))
    rows = list(csv.DictReader(open(ev))) if os.path.exists(ev) else []
    rep = json.load(open(js)) if os.path.exists(js) else {}
    rep["problems"] = T.find_key(rep, "problems") or []
    return rows, rep, p.stderr


def main():
    np_ = 4
    if "--np" in sys.argv:
        np_ = int(sys.argv[sys.argv.index("--np") + 1])
    tmp = tempfile.mkdtemp(prefix="cs-p2p-")
    rundir = os.path.join(tmp, "run")
    out = T.launch(os.path.join(T.TESTBIN, "cs_nccl_pipeline"), [str(ITERS)], np_, rundir,
                   extra_env={"COMMSCOPE_CUPTI_LIB": os.environ["CS_FAKE_CUPTI"]})
    if not T.check(all(rc == 0 for rc, _, _ in out), "every rank exits 0"):
        return finish()
    # Exit status 0, or 1 when the report lists problems (the pipeline's stages differ in their
    # call pattern, so steps may not be detected); none may be about point-to-point matching.
    rows, rep, err = analyze(rundir)
    for p in rep["problems"]:
        T.check("ncclSend" not in p and "ncclRecv" not in p and "NCCL kernels" not in p,
                "no problem about NCCL point-to-point or NCCL kernels: %s" % p)
    p2p = rep.get("nccl_p2p")
    if not T.check(p2p is not None, "the report has nccl_p2p"):
        return finish()
    want = {}
    for r in range(np_ - 1):
        want[(r, r + 1)] = ITERS * 4096 * (r + 1)      # forward activations
        want[(r + 1, r)] = ITERS * 2048 * (r + 2)      # backward gradients
    got = {(c["from"], c["to"]): c for c in p2p["channels"]}
    T.check(set(got) == set(want), "channels %s, want %s" % (sorted(got), sorted(want)))
    waits = expected_waits(rows, np_)
    for ch, b in sorted(want.items()):
        c = got.get(ch)
        if not c:
            continue
        T.check(c["comm"] != "world" and c["comm"].startswith("comm-"),
                "channel %s on the NCCL communicator (%s)" % (ch, c["comm"]))
        T.check(c["sends"] == ITERS and c["recvs"] == ITERS,
                "channel %s: %d sends, %d recvs (want %d each)" % (ch, c["sends"], c["recvs"],
                                                                  ITERS))
        T.check(c["bytes"] == b, "channel %s: %d bytes (want %d)" % (ch, c["bytes"], b))
        T.check(c["pairs"] == ITERS and c["timed_pairs"] == ITERS,
                "channel %s: %d pairs, %d timed (want %d)" % (ch, c["pairs"], c["timed_pairs"],
                                                             ITERS))
        T.check(c["mismatched_bytes"] == 0, "channel %s: sides agree on bytes" % (ch,))
        ls, lsw, lr, lrw = waits.get(ch, (0, 0, 0, 0))
        T.check(c["late_sender"] == ls and c["late_receiver"] == lr,
                "channel %s: late sender %d, late receiver %d (from the events: %d, %d)"
                % (ch, c["late_sender"], c["late_receiver"], ls, lr))
        T.check(abs(c["late_sender_wait_s"] - lsw / 1e9) < 1e-9 and
                abs(c["late_receiver_wait_s"] - lrw / 1e9) < 1e-9,
                "channel %s: waits %.9f / %.9f s (from the events: %.9f / %.9f)"
                % (ch, c["late_sender_wait_s"], c["late_receiver_wait_s"], lsw / 1e9, lrw / 1e9))
    n_pairs = 2 * (np_ - 1) * ITERS
    T.check(p2p["pairs"] == n_pairs and p2p["timed_pairs"] == n_pairs,
            "%d pairs, %d timed (want %d)" % (p2p["pairs"], p2p["timed_pairs"], n_pairs))
    T.check(p2p["unmatched_sends"] == 0 and p2p["unmatched_recvs"] == 0 and
            p2p["skipped_calls"] == 0 and p2p["untimed_calls"] == 0,
            "nothing unmatched, skipped or untimed: %s" % {k: v for k, v in p2p.items()
                                                           if k != "channels"})
    T.check(p2p["late_sender"] + p2p["late_receiver"] > 0, "some pair had a wait on GPU time")
    # the op rows: NCCL calls as issued
    ops = {o["op"]: o for o in rep.get("ops", []) if o.get("op", "").startswith("nccl")}
    T.check(ops.get("ncclSend", {}).get("calls") == 2 * (np_ - 1) * ITERS,
            "ncclSend calls %s" % ops.get("ncclSend", {}).get("calls"))
    T.check(ops.get("ncclSend", {}).get("bytes") == sum(want.values()),
            "ncclSend bytes %s (want %d)" % (ops.get("ncclSend", {}).get("bytes"),
                                             sum(want.values())))
    # The GPU what-if with the send/recv kernels linked: each rank's ncclGroupEnd (once per
    # iteration) marks its steps; unchanged, the replay gives the measured step, and no link
    # forms a cycle (a wrong pairing across ranks would).
    js = os.path.join(rundir, "report-steps.json")
    p = subprocess.run([os.path.join(T.BIN, "commscope"), "analyze", rundir, "--json", js],
                       capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, COMMSCOPE_STEP_MARKER="ncclGroupEnd"))
    rep2 = json.load(open(js)) if os.path.exists(js) else {}
    w = rep2.get("whatif", {})
    # Point-to-point waits on the GPU timelines: the exposed kernel time inside them is waiting,
    # in the rank's segments (over the run) as in the step budget.
    g = expected_gpu_waiting(rows, np_)
    seg = {b["rank"]: b for b in rep2.get("breakdown", [])}
    for r in range(np_):
        got = seg.get(r, {}).get("waiting_s")
        T.check(got is not None and abs(got - g[r] / 1e9) < 1e-9,
                "rank %d: waiting %s s on its GPU timeline (from the events: %.9f)"
                % (r, got, g[r] / 1e9))
    T.check(sum(g.values()) > 0, "some exposed NCCL time was waiting")
    note = w.get("note") or ""
    T.check(note.startswith("replayed on the GPU timelines"),
            "GPU what-if ran on the GPU timelines: %r" % note)
    T.check(" 0 dependency cycles" in note or note == "replayed on the GPU timelines",
            "no dependency cycle: %r" % note)
    err = w.get("replay_error")
    T.check(isinstance(err, (int, float)) and abs(err) <= 0.05,
            "replay within 5 %% of the measured step: %r" % w)
    # The scenarios change the timed steps only: hiding or speeding up communication never
    # lengthens a step (up to the JSON's rounding).
    rp = w.get("replayed_step_s")
    for k in ("full_overlap_step_s", "best_bandwidth_step_s"):
        v = w.get(k)
        T.check(isinstance(v, float) and isinstance(rp, float) and v <= rp + 1e-9,
                "GPU what-if %s %r <= replayed %r" % (k, v, rp))
    if not T.failures:
        shutil.rmtree(tmp, ignore_errors=True)
    return finish()


def finish():
    if T.failures:
        print("%d failed checks" % len(T.failures), file=sys.stderr)
        return 1
    print("all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
