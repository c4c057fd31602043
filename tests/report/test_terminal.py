#!/usr/bin/env python3
"""The terminal experience of `commscope analyze`: a progress line on stderr only when stderr is a
terminal and --quiet is not given, erased before the report.

Usage: test_terminal.py; CS_BIN names the build's bin/ folder.  A synthetic run of 2 x 600,000
events (cs_bench_analyzer -k: more than the 2^20 events between progress updates) is analysed
three times: stderr on a pseudo-terminal (progress shown, then erased), stderr on a pipe (none),
and on a pseudo-terminal with --quiet (none, and no text summary).  Exit 0 pass, 1 fail.
"""
import os
import pty
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_reports  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
COMMSCOPE = os.path.join(BIN, "commscope")
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)
    return cond


def on_pty(args):
    """(exit status, stdout, what the pseudo-terminal on stderr received)."""
    master, slave = pty.openpty()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    got = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO once the child closed its side
            break
        if not chunk:
            break
        got += chunk
    out = p.stdout.read()
    rc = p.wait()
    os.close(master)
    return rc, out.decode(errors="replace"), got.decode(errors="replace")


def main():
    tmp = tempfile.mkdtemp(prefix="cs-term-")
    try:
        d = os.path.join(tmp, "run")
        p = subprocess.run([os.path.join(BIN, "cs_bench_analyzer"), "-r", "2", "-e", "600000",
                            "-n", "1", "-d", d, "-k"], capture_output=True, text=True, timeout=300)
        if p.returncode:
            raise SystemExit("cs_bench_analyzer failed: %s" % p.stderr)
        rc, out, tty = on_pty([COMMSCOPE, "analyze", d])
        check(rc in (0, 1) and "@ commscope analysis" in out, "analyze on a terminal: %d" % rc)
        lines = re.findall(r"commscope analyze: +(\d+)% \((\d+) of (\d+) events\)", tty)
        check(lines, "progress line on the terminal: %r" % tty[:300])
        if lines:
            total = int(lines[0][2])
            check(total >= 1200000,
                  "progress counts the run's events: %r" % (lines[:3],))
            check(all(int(a) <= 100 and int(b) <= int(c) for a, b, c in lines),
                  "progress within bounds: %r" % lines)
            check(tty.rstrip("\r\n").endswith("\x1b[K"), "progress line erased at the end: %r"
                  % tty[-80:])
        p = subprocess.run([COMMSCOPE, "analyze", d], capture_output=True, text=True, timeout=300)
        check("%" not in p.stderr and "events)" not in p.stderr,
              "no progress on a pipe: %r" % p.stderr[:300])
        rc, out, tty = on_pty([COMMSCOPE, "analyze", d, "--quiet"])
        check("events)" not in tty and out == "", "--quiet on a terminal: no progress, no summary: "
              "%r %r" % (tty[:300], out[:200]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return test_reports.verdict(failures)


if __name__ == "__main__":
    sys.exit(main())
