#!/usr/bin/env python3
"""Perfetto export: slices that overlap without nesting on one track go to lanes of it.

Usage: test_perfetto_lanes.py [SHARED_DATA]; CS_BIN names the build's bin/ folder.  overlap_run writes a run in
which two threads call ncclAllReduce on one communicator at overlapping times, NCCL kernels of one
communicator overlap without nesting (two streams), and compute kernels of one stream overlap
(GPU records out of start order).  Checked:
  - the export validates (perfetto_check: strict nesting on every track);
  - every record is exactly one slice, on its track ("GPU 0 stream 7", ...) or a lane of it
    ("GPU 0 stream 7 · lane 2") with the track's sort index;
  - the lane of each slice is the one the documented greedy partition gives: records sorted by
    (begin, longer first), each to the lowest lane it nests in (computed here independently);
  - the same slices with the lanes folded back onto their track (the layout before lanes) FAIL
    the validator with a nesting error on exactly the tracks that needed lanes;
  - a real Kineto trace with overlapping NCCL kernels (SHARED_DATA/kineto, skipped when absent):
    the export validates, has lanes, and fails with them folded back.
Exit 0 pass, 1 fail.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import perfetto_check  # noqa: E402
import test_reports  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
failures = []
LANE = " \u00b7 lane "


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def greedy(recs):
    """Lane number (1 = the track) per record: the partition the export documents."""
    lanes, out = [], {}
    for r in sorted(recs, key=lambda r: (r["tb"], -r["te"])):
        for i, stack in enumerate(lanes):
            open_ = [e for e in stack if e > r["tb"]]
            if not open_ or open_[-1] >= r["te"]:
                stack[:] = open_ + [r["te"]]
                out[id(r)] = i + 1
                break
        else:
            lanes.append([r["te"]])
            out[id(r)] = len(lanes)
    return out


def fold(doc):
    """The slices of lane tracks moved back onto their track (the layout before lanes)."""
    evs = doc["traceEvents"]
    tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
             if e["ph"] == "M" and e.get("name") == "thread_name"}
    base = {(pid, n): tid for (pid, tid), n in tname.items() if LANE not in n}
    lanes = 0
    for e in evs:
        n = tname.get((e["pid"], e.get("tid")), "")
        if LANE not in n:
            continue
        if e["ph"] == "M":
            lanes += e.get("name") == "thread_name"
            e.update(ph="i", s="t", ts=0)
        else:
            e["tid"] = base[(e["pid"], n.split(LANE)[0])]
    return lanes


def real(tmp):
    """A real PyTorch profiler trace (CS_SHARED_DATA/kineto; skipped when absent) whose NCCL
    SendRecv kernels on three streams overlap, and a memcpy overlaps a kernel of its stream."""
    data = sys.argv[1] if len(sys.argv) > 1 else ""
    path = os.path.join(data, "kineto/hta/negative_queue_length_values_check_rank0.json.gz")
    if not os.path.exists(path):
        print("SKIP real trace: %s not found" % path)
        return
    out = os.path.join(tmp, "real.json")
    p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", "--from", "kineto", path,
                        "-q", "--perfetto", out], capture_output=True, text=True)
    check(p.returncode in (0, 1) and os.path.exists(out), "analyze --from kineto: %d %s"
          % (p.returncode, p.stderr[-500:]))
    errs, st = perfetto_check.validate(out)
    check(not errs, "real trace's export validates: %s" % errs[:5])
    with open(out) as fh:
        doc = json.load(fh)
    lanes = fold(doc)
    old = os.path.join(tmp, "real-old.json")
    with open(old, "w") as fh:
        json.dump(doc, fh)
    errs, st_old = perfetto_check.validate(old)
    check(lanes > 0 and st_old["nesting_errors"] > 0 and st_old["X"] == st["X"],
          "real trace: %d lane tracks; folded back, %d nesting errors" %
          (lanes, st_old["nesting_errors"]))
    print("real trace: %d slices on %d tracks, %d lane tracks; folded back: %d nesting errors"
          % (st["X"], st["tracks_checked"], lanes, st_old["nesting_errors"]))


def main():
    tmp = tempfile.mkdtemp(prefix="cs-lanes-")
    try:
        d = os.path.join(tmp, "run")
        p = subprocess.run([os.path.join(BIN, "overlap_run"), d], capture_output=True, text=True)
        if p.returncode:
            raise SystemExit("overlap_run failed: %s" % p.stderr)
        recs = []
        for line in p.stdout.splitlines():
            f = line.split()
            if f[0] == "gpu":
                nccl = f[2] == "gpu_nccl"
                recs.append(dict(rank=int(f[1]), name=f[2], tb=int(f[8]), te=int(f[9]),
                                 track="GPU %s NCCL kernels on world" % f[3] if nccl
                                 else "GPU %s stream %s" % (f[3], f[4])))
            else:
                recs.append(dict(rank=int(f[1]), name=f[2], tb=int(f[6]), te=int(f[7]),
                                 track="collectives on world"))
        out = os.path.join(tmp, "t.json")
        p = subprocess.run([os.path.join(BIN, "commscope"), "analyze", d, "-q", "--perfetto", out],
                           capture_output=True, text=True)
        check(p.returncode in (0, 1) and os.path.exists(out), "analyze: %d %s"
              % (p.returncode, p.stderr))
        errs, st = perfetto_check.validate(out)
        check(not errs, "export validates: %s" % errs[:5])
        with open(out) as fh:
            doc = json.load(fh)
        evs = doc["traceEvents"]
        tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in evs
                 if e["ph"] == "M" and e.get("name") == "thread_name"}
        tsort = {(e["pid"], e["tid"]): e["args"]["sort_index"] for e in evs
                 if e["ph"] == "M" and e.get("name") == "thread_sort_index"}
        # The aligned clock's offset from rank 0's first host call.
        t0 = min(round(e["ts"] * 1000) for e in evs if e["ph"] == "X" and e["pid"] == 0
                 and e["name"] == "ncclAllReduce") - min(r["tb"] for r in recs
                                                         if r["rank"] == 0 and r["name"] ==
                                                         "ncclAllReduce")
        by_track = {}
        for r in recs:
            by_track.setdefault((r["rank"], r["track"]), []).append(r)
        want_lanes = {}
        for recs_t in by_track.values():
            want_lanes.update(greedy(recs_t))
        slices = [e for e in evs if e["ph"] == "X" and e.get("cat") != "step"]
        check(len(slices) == len(recs), "%d slices for %d records" % (len(slices), len(recs)))
        base_tid = {}
        used = set()
        for r in recs:
            hit = [e for e in slices if e["pid"] == r["rank"] and e["name"] == r["name"]
                   and round(e["ts"] * 1000) == r["tb"] + t0
                   and round(e["dur"] * 1000) == r["te"] - r["tb"]]
            if not check(len(hit) == 1, "one slice for %r: %d" % (r, len(hit))):
                continue
            e = hit[0]
            used.add(id(e))
            name = tname.get((e["pid"], e["tid"]), "")
            lane = want_lanes[id(r)]
            base = name.split(LANE)[0]
            check(base.startswith(r["track"]), "track of %r: %r" % (r, name))
            check(name == base + (LANE + str(lane) if lane > 1 else ""),
                  "%r on %r, expected lane %d" % (r, name, lane))
            if lane == 1:
                base_tid[(e["pid"], base)] = e["tid"]
                base_tid[(e["pid"], r["track"])] = e["tid"]
        # Lanes sort with their track; folding them back gives the old layout, which must fail.
        lanes_seen = 0
        for (pid, tid), name in tname.items():
            if LANE in name:
                lanes_seen += 1
                bt = base_tid.get((pid, name.split(LANE)[0]))
                check(bt is not None and tsort.get((pid, tid)) == tsort.get((pid, bt)),
                      "lane %r sorts with its track" % name)
        need = sum(1 for t in by_track.values() if max(greedy(t).values()) > 1)
        check(lanes_seen == sum(max(greedy(t).values()) - 1 for t in by_track.values()),
              "%d lane tracks" % lanes_seen)
        check(need == 4, "the run needs lanes on 4 tracks, %d" % need)
        for e in evs:
            if e["ph"] in ("X", "s", "t", "f", "M") and LANE in tname.get((e["pid"], e["tid"]), ""):
                if e["ph"] == "M":
                    e["ph"] = "i"  # drop the lane's name
                    e["s"] = "t"
                    e["ts"] = 0
                else:
                    e["tid"] = base_tid[(e["pid"], tname[(e["pid"], e["tid"])].split(LANE)[0])]
        old = os.path.join(tmp, "old.json")
        with open(old, "w") as fh:
            json.dump(doc, fh)
        errs, st = perfetto_check.validate(old)
        nest = [x for x in errs if "without nesting" in x]
        bad = {(x.split()[1], x.split()[3].rstrip(":")) for x in nest}
        want = {(str(pid), str(base_tid[(pid, t)])) for (pid, t), rs in by_track.items()
                if max(greedy(rs).values()) > 1}
        check(nest and len(nest) == len(errs) == st["nesting_errors"] and bad == want,
              "the old layout fails on the tracks with lanes %s: %s" % (sorted(want), errs))
        print("lanes: %d lane tracks; old layout: %s" % (lanes_seen, nest))
        real(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
