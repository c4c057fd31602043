"""Structural validation of a Chrome trace-event JSON file as commscope writes it.

validate(path) returns (errors, stats): errors is a list of sentences (empty when valid), stats
counts what was found.  Checked:
  - the file is JSON with a traceEvents list; every event has ph, pid and a numeric ts;
  - every pid has a process_name "rank N (...)" and every (pid, tid) with slices a thread_name;
  - complete slices ("X") have dur >= 0, and on every (pid, tid) track all slices (X, and B/E
    pairs) nest strictly: in integer nanoseconds (the file's times are µs with three decimals), a
    slice either lies inside the slice enclosing it or starts at or after that one's end; two
    slices beginning together nest when one ends no later than the other; every offending pair of
    every track is reported;
  - every "B" has its "E" on the same track, names matching, in order;
  - async slices: every "b" has exactly one "e" with the same (pid, cat, id, name), not earlier;
    no "e" without its "b";
  - flows: per id one "s" first, then "t"s, at most one "f" last, timestamps not decreasing,
    and every flow point lies within an X slice on its own track (the slice it binds to).
"""
import bisect
import json
import re


def validate(path):
    errs = []
    stats = {"X": 0, "flows": 0, "flows_finished": 0, "async": 0, "counters": 0, "pids": set(),
             "slices_by_name": {}, "tracks_checked": 0, "nesting_errors": 0}
    try:
        with open(path) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        return ["%s: not valid JSON: %s" % (path, e)], stats
    evs = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(evs, list):
        return ["%s: no traceEvents list" % path], stats

    pnames, tnames = {}, set()
    tracks = {}      # (pid, tid) -> [(ts, end, name)]
    be = {}          # (pid, tid) -> stack of B names
    async_open = {}  # key -> ts
    flows = {}       # id -> [(ph, ts, pid, tid)]
    used_tracks = set()
    for i, e in enumerate(evs):
        where = "event %d" % i
        if not isinstance(e, dict) or "ph" not in e or "pid" not in e:
            errs.append("%s: lacks ph or pid: %r" % (where, e))
            continue
        ph, pid, tid = e["ph"], e["pid"], e.get("tid", 0)
        ts = e.get("ts")
        if ph != "M" and not isinstance(ts, (int, float)):
            errs.append("%s: ts %r is not a number" % (where, ts))
            continue
        stats["pids"].add(pid)
        if ph == "M":
            if e.get("name") == "process_name":
                pnames[pid] = e.get("args", {}).get("name", "")
            elif e.get("name") == "thread_name":
                tnames.add((pid, tid))
        elif ph == "X":
            dur = e.get("dur")
            if not isinstance(dur, (int, float)) or dur < 0:
                errs.append("%s: X slice with dur %r" % (where, dur))
                continue
            tracks.setdefault((pid, tid), []).append((ts, ts + dur, e.get("name")))
            used_tracks.add((pid, tid))
            stats["X"] += 1
            n = e.get("name")
            stats["slices_by_name"][n] = stats["slices_by_name"].get(n, 0) + 1
        elif ph == "B":
            be.setdefault((pid, tid), []).append((e.get("name"), ts))
            used_tracks.add((pid, tid))
        elif ph == "E":
            st = be.get((pid, tid))
            if not st:
                errs.append("%s: E without B on pid %s tid %s" % (where, pid, tid))
            else:
                name, bts = st.pop()
                if ts < bts or (e.get("name") not in (None, name)):
                    errs.append("%s: E %r does not close B %r" % (where, e.get("name"), name))
                else:
                    tracks.setdefault((pid, tid), []).append((bts, ts, name))
        elif ph in ("b", "e"):
            ident = e.get("id2", {}).get("local") if "id2" in e else e.get("id")
            key = (pid, e.get("cat"), ident, e.get("name"))
            if ph == "b":
                if key in async_open:
                    errs.append("%s: async b %r opened twice" % (where, key))
                async_open[key] = ts
                stats["async"] += 1
            else:
                if key not in async_open:
                    errs.append("%s: async e %r without its b" % (where, key))
                elif ts < async_open[key]:
                    errs.append("%s: async e %r before its b" % (where, key))
                else:
                    del async_open[key]
        elif ph in ("s", "t", "f"):
            flows.setdefault(e.get("id"), []).append((ph, ts, pid, tid, i))
        elif ph == "C":
            args = e.get("args", {})
            if not args or not all(isinstance(v, (int, float)) for v in args.values()):
                errs.append("%s: counter without numeric args: %r" % (where, args))
            stats["counters"] += 1
        elif ph in ("i", "I"):
            pass
        else:
            errs.append("%s: unexpected phase %r" % (where, ph))

    for key, st in be.items():
        if st:
            errs.append("B %r on pid %s tid %s has no E" % (st[-1][0], key[0], key[1]))
    for key in async_open:
        errs.append("async b %r has no e" % (key,))
    for pid in stats["pids"]:
        if not re.match(r"rank \d+ \(", pnames.get(pid, "")):
            errs.append("pid %s has no process_name 'rank N (host)': %r" % (pid, pnames.get(pid)))
    for t in used_tracks:
        if t not in tnames:
            errs.append("track pid %s tid %s has slices but no thread_name" % t)

    # Nesting per track, strictly, in integer ns (times are whole ns written as µs with three
    # decimals, so rounding the floats to ns is exact).
    starts = {}
    for key, sl in tracks.items():
        stats["tracks_checked"] += 1
        ns = sorted(((round(s[0] * 1000), round(s[1] * 1000), s[2]) for s in sl),
                    key=lambda s: (s[0], -s[1]))
        stack = []
        for s in ns:
            while stack and s[0] >= stack[-1][1]:
                stack.pop()
            if stack and s[1] > stack[-1][1]:
                stats["nesting_errors"] += 1
                errs.append("pid %s tid %s: slice %s [%.3f, %.3f] overlaps %s [%.3f, %.3f] without "
                            "nesting" % (key[0], key[1], s[2], s[0] / 1000, s[1] / 1000,
                                         stack[-1][2], stack[-1][0] / 1000, stack[-1][1] / 1000))
                continue  # left out, so the next slices are checked against the valid ones
            stack.append(s)
        sl.sort(key=lambda s: (s[0], -s[1]))
        starts[key] = ([s[0] for s in sl], sl)

    def inside_slice(pid, tid, ts):
        if (pid, tid) not in starts:
            return False
        st, sl = starts[(pid, tid)]
        j = bisect.bisect_right(st, ts)
        for k in range(j - 1, max(-1, j - 50), -1):
            if sl[k][0] <= ts <= sl[k][1]:
                return True
        return False

    for fid, pts in flows.items():
        pts.sort(key=lambda p: p[4])  # file order
        phs = [p[0] for p in pts]
        if phs[0] != "s" or phs.count("s") != 1:
            errs.append("flow %r does not start with exactly one s: %s" % (fid, phs))
        if "f" in phs and (phs.count("f") != 1 or phs[-1] != "f"):
            errs.append("flow %r: f is not single and last: %s" % (fid, phs))
        for a, b in zip(pts, pts[1:]):
            if b[1] < a[1]:
                errs.append("flow %r goes back in time (%s after %s)" % (fid, b[1], a[1]))
                break
        for p in pts:
            if not inside_slice(p[2], p[3], p[1]):
                errs.append("flow %r point %s at %s on pid %s tid %s binds to no slice"
                            % (fid, p[0], p[1], p[2], p[3]))
        stats["flows"] += 1
        stats["flows_finished"] += "f" in phs
    return errs, stats
