#!/usr/bin/env python3
"""The command line's help and usage errors, for `commscope` and every subcommand.

- `commscope CMD --help` (and `-h`, and `commscope help CMD`) prints the same text on stdout,
  exits 0, starts with "usage: commscope CMD", fits an 80-column terminal, gives an example and
  the exit statuses.
- `commscope CMD --no-such-option` exits 2, prints nothing on stdout and one line on stderr that
  names the option and points at `--help`.
- `commscope` alone and an unknown command are usage errors (2); `commscope --help` lists every
  command.

usage: test_cli.py BIN_DIR.  Exit 0 pass, 1 fail.
"""
import os
import subprocess
import sys

COMMANDS = ["run", "analyze", "version", "topo", "fabric", "compare", "node-snapshot"]
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def cs(*args):
    return subprocess.run([COMMSCOPE] + list(args), capture_output=True, text=True, timeout=60)


def check_text(name, text):
    long = [line for line in text.splitlines() if len(line) > 80]
    check(not long, "%s: lines over 80 columns: %r" % (name, long))
    check("\t" not in text, "%s: no tabs (their width is the terminal's)" % name)


def main():
    global COMMSCOPE
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    COMMSCOPE = os.path.join(sys.argv[1], "commscope")

    top = cs("--help")
    check(top.returncode == 0 and top.stdout.startswith("usage: commscope"),
          "commscope --help: %d %r" % (top.returncode, top.stdout[:80]))
    check_text("commscope --help", top.stdout)
    for c in COMMANDS:
        check(("\n  %s " % c) in top.stdout, "commscope --help lists %s" % c)
    p = cs()
    check(p.returncode == 2 and p.stderr and not p.stdout,
          "commscope alone: %d %r" % (p.returncode, p.stderr))
    p = cs("no-such-command")
    check(p.returncode == 2 and "no-such-command" in p.stderr and "--help" in p.stderr,
          "unknown command: %d %r" % (p.returncode, p.stderr))

    for c in COMMANDS:
        h = cs(c, "--help")
        check(h.returncode == 0, "%s --help exits %d" % (c, h.returncode))
        check(h.stdout.startswith("usage: commscope %s" % c),
              "%s --help starts with its usage: %r" % (c, h.stdout[:60]))
        check(not h.stderr, "%s --help writes nothing on stderr: %r" % (c, h.stderr))
        check_text(c + " --help", h.stdout)
        if c != "node-snapshot":  # internal: started by the collector, not by hand
            check("exit status" in h.stdout, "%s --help gives the exit statuses" % c)
            check("\n  commscope %s" % c in h.stdout, "%s --help gives an example" % c)
        for alt in ([c, "-h"], ["help", c]):
            a = cs(*alt)
            check(a.returncode == 0 and a.stdout == h.stdout,
                  "%s prints the same as %s --help" % (" ".join(alt), c))
        if c == "node-snapshot":
            continue
        # compare and analyze take operands after options; run and fabric stop at the program
        bad = cs(c, "--no-such-option")
        check(bad.returncode == 2, "%s --no-such-option exits %d" % (c, bad.returncode))
        check(not bad.stdout, "%s --no-such-option: nothing on stdout: %r" % (c, bad.stdout))
        lines = bad.stderr.strip().splitlines()
        check(len(lines) == 1 and "--no-such-option" in lines[0] and "--help" in lines[0],
              "%s --no-such-option: one line naming it: %r" % (c, bad.stderr))

    print("test_cli: %d commands, %d failures" % (len(COMMANDS), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
