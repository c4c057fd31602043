#!/usr/bin/env python3
"""The Kineto importer on hostile input: nesting far deeper than any trace, and every kind of
number a time or duration can be written as (infinite, NaN, beyond 64 bits, as a string, beyond
the trace format's range once the base time is added).

Each input must end with exit status 0, 1 or 3, never by a signal or a sanitizer report
(this test runs in the ASan+UBSan build too), and say what it did: a document nested deeper than
the limit is refused with the limit named; every event it skips is counted with its reason in the
report's problems, and the events it keeps are exactly the sound ones.

usage: kineto_hostile.py; CS_BIN names the build's bin/ folder.  Exit 0 pass, 1 fail.
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
import fuzzlib  # noqa: E402

COMMSCOPE = os.path.join(os.environ.get("CS_BIN", ""), "commscope")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def analyze(path, tmp):
    out = os.path.join(tmp, "out.json")
    if os.path.exists(out):
        os.unlink(out)
    p = subprocess.run([COMMSCOPE, "analyze", "--from", "kineto", path, "--json", out, "--quiet"],
                       capture_output=True, text=True, timeout=120)
    bad = fuzzlib.exit_problem(p, (0, 1, 3))
    check(bad is None, "%s: %s (stderr: %s)" % (os.path.basename(path), bad, p.stderr[-600:]))
    rep = None
    if p.returncode in (0, 1) and os.path.exists(out):
        with open(out) as f:
            rep = json.load(f)
    return p, rep


def kernel(name, ts, dur, corr):
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
            "args": {"device": 0, "stream": 7, "correlation": corr}}


def write_raw(tmp, name, text):
    path = os.path.join(tmp, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def trace_text(events, base=None):
    """A one-rank trace; RawNumber values are written as their text (1e999, NaN, ...)."""
    raws = []

    def placeholder(o):
        raws.append(o.text)
        return "@@raw%d@@" % (len(raws) - 1)

    doc = {"schemaVersion": 1, "distributedInfo": {"rank": 0, "world_size": 1}}
    if base is not None:
        doc["baseTimeNanoseconds"] = RawNumber(base)
    doc["traceEvents"] = events
    text = json.dumps(doc, default=placeholder)
    for i, raw in enumerate(raws):
        text = text.replace('"@@raw%d@@"' % i, raw)
    return text


class RawNumber:
    def __init__(self, text):
        self.text = text


def problems(rep):
    return rep["trace"]["problems"] if rep else []


def skipped(rep, phrase):
    """N of the problem line "kineto: FILE: N <phrase> skipped (first: ...)", 0 without one."""
    for line in problems(rep):
        if phrase in line and " skipped" in line:
            return int(line.split(": ", 2)[-1].split()[0])
    return 0


def case_depth(tmp):
    """Nesting: deep but within the limit is read (the event kept); beyond it, refused with the
    limit named, quickly, whatever the depth."""
    for depth in (15, 16, 17, 40, 990):
        inner = "[" * depth + "1" + "]" * depth
        ev = kernel("g", 100, 10, 1)
        ev["args"]["nest"] = RawNumber(inner)
        p, rep = analyze(write_raw(tmp, "d%d.json" % depth, trace_text([ev])), tmp)
        check(p.returncode in (0, 1) and rep is not None,
              "depth %d within the limit analysed (exit %d)" % (depth, p.returncode))
        if rep:
            check(rep["trace"]["events"] >= 1, "depth %d: the kernel kept: %r"
                  % (depth, rep["trace"]["events"]))
    for depth in (1001, 100000, 2000000):
        text = ('{"traceEvents": [{"ph": "X", "args": {"x": ' + "[" * depth + "]" * depth +
                "}}]}")
        p, _ = analyze(write_raw(tmp, "deep%d.json" % depth, text), tmp)
        check(p.returncode == 3, "depth %d: exit %d, expected 3" % (depth, p.returncode))
        check("nested more than 1000 levels deep" in p.stderr,
              "depth %d: the limit named: %r" % (depth, p.stderr[-300:]))


def case_numbers(tmp):
    """Every unusable time skips its event, counted under its reason; the sound ones stay."""
    bad_ts = ["1e999", "-1e999", '"NaN"', '"abc"', '"Infinity"']
    range_ts = ["9.1e15", "-9.1e15", "4611686018427388", "99999999999999999999999999", "1" * 400]
    bad_dur = ["1e300", '"NaN"', "1e999", "9223372036854775807"]
    events = [kernel("good%d" % i, 100 + 20 * i, 10, 100 + i) for i in range(3)]
    k = 1000
    for t in bad_ts + range_ts:
        events.append(kernel("bad-ts", RawNumber(t), 10, k))
        k += 1
    for d in bad_dur:
        events.append(kernel("bad-dur", 500, RawNumber(d), k))
        k += 1
    events.append(kernel("negative", 600, -5, k))
    p, rep = analyze(write_raw(tmp, "numbers.json", trace_text(events)), tmp)
    check(p.returncode == 1 and rep is not None, "numbers: exit %d, expected 1" % p.returncode)
    if not rep:
        return
    got = {
        "ts": skipped(rep, 'events whose "ts" is not a finite number'),
        "range": skipped(rep, "events whose time lies beyond 2^61 ns"),
        "dur": skipped(rep, 'events whose "dur" is not a finite number'),
        "neg": skipped(rep, "events with a negative duration"),
    }
    want = {"ts": len(bad_ts), "range": len(range_ts), "dur": len(bad_dur), "neg": 1}
    check(got == want, "skipped by reason %r, expected %r" % (got, want))
    check(rep["trace"]["events"] == 3, "the 3 sound kernels kept: %r" % rep["trace"]["events"])


def case_base(tmp):
    """A base time beyond range is ignored with a note; a time that the base pushes past the
    format's range (2^62 ns) skips its record, counted."""
    ev = [kernel("a", 100, 10, 1), kernel("b", 200, 10, 2)]
    p, rep = analyze(write_raw(tmp, "base_big.json", trace_text(ev, base="18446744073709551615")),
                     tmp)
    check(any("baseTimeNanoseconds is not a number below 2^61" in x for x in problems(rep)),
          "huge base noted: %r" % problems(rep))
    check(rep is not None and rep["trace"]["events"] == 2, "both kernels kept with the base "
          "ignored: %r" % (rep and rep["trace"]["events"]))
    # A base and a time each just below 2^61 ns, and a duration of 2e18 ns, end past 2^62 ns.
    near = "2305843009213693"  # us: 2^61 ns less a little
    ev = [kernel("a", 100, 10, 1), kernel("far", RawNumber(near), 2000000000000000, 2)]
    p, rep = analyze(write_raw(tmp, "base_far.json", trace_text(ev, base="2305843009213693000")),
                     tmp)
    check(any("1 records skipped whose time with baseTimeNanoseconds" in x
              for x in problems(rep)), "time past 2^62 with the base noted: %r" % problems(rep))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        case_depth(tmp)
        case_numbers(tmp)
        case_base(tmp)
    if failures:
        print("%d failure(s)" % len(failures), file=sys.stderr)
        return 1
    print("kineto_hostile: all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
