"""What the fuzzers written in Python share (tests/unit/fuzz_kineto.py, tests/topology/fuzz_topo.py):
their command line, and the rules every run of a damaged input must keep (those of
tests/unit/test_fuzz.c): no signal, no sanitizer report, an allowed exit status, finite numbers,
JSON that parses."""
import json
import os
import re
import shutil
import sys

NONFINITE = re.compile(r"(?<![A-Za-z])(nan|inf|infinity)(?![A-Za-z])", re.I)


def options(prog, default_iters):
    """(shared data dir, iterations, seed) from `prog SHARED_DATA_DIR [ITERATIONS]`,
    CS_FUZZ_ITERATIONS and CS_FUZZ_SEED; exits 2 on a usage error."""
    if len(sys.argv) < 2:
        print("usage: %s SHARED_DATA_DIR [ITERATIONS]" % prog, file=sys.stderr)
        sys.exit(2)
    iters = int(os.environ.get("CS_FUZZ_ITERATIONS") or (sys.argv[2] if len(sys.argv) > 2
                                                          else default_iters))
    return sys.argv[1], iters, int(os.environ.get("CS_FUZZ_SEED") or 1)


def exit_problem(p, allowed):
    """What is wrong with how the process p (subprocess.run's result) ended, or None."""
    if p.returncode < 0:
        return "killed by signal %d" % -p.returncode
    if "Sanitizer" in p.stderr or "runtime error:" in p.stderr:
        return "a sanitizer report"
    if p.returncode not in allowed:
        return "exit status %d" % p.returncode
    if p.returncode != 0 and not p.stderr.strip():
        return "exit status %d and nothing said on stderr" % p.returncode
    return None


def nonfinite_line(text):
    """The first line of text that prints "nan" or "inf" as a word, or None."""
    m = NONFINITE.search(text)
    if not m:
        return None
    return text[text.rfind("\n", 0, m.start()) + 1:].split("\n")[0][:160]


def json_problem(path, what):
    """Why the file at path is not JSON with finite numbers only, or None."""
    def no_constants(c):
        raise ValueError("non-finite number %s" % c)

    try:
        with open(path) as f:
            json.load(f, parse_constant=no_constants)
    except (OSError, ValueError) as e:
        return "the %s: %s" % (what, e)
    return None


class Tally:
    """The exit statuses and failures of a campaign, and its last words."""

    def __init__(self, prog, iters, seed, root):
        self.prog, self.iters, self.seed, self.root = prog, iters, seed, root
        self.codes, self.failures = {}, 0

    def count(self, p):
        rc = p.returncode if p else None
        self.codes[rc] = self.codes.get(rc, 0) + 1

    def fail(self, it, why, desc, src, kept, p):
        """Keep the failing input src as kept and say what failed and how it was made."""
        self.failures += 1
        os.rename(src, kept)
        print("FAIL iteration %d: %s\n  changes: %s\n  kept in %s\n  stderr: %s"
              % (it, why, "; ".join(desc), kept, (p.stderr if p else "")[-1500:]))

    def finish(self):
        """The exit status: 0 (scratch folder removed) or 1 (kept)."""
        print("%s: %d iterations, exit statuses %r, %d failed"
              % (self.prog, self.iters, self.codes, self.failures))
        if self.failures:
            print("%s: failing inputs kept under %s (CS_FUZZ_SEED=%d)"
                  % (self.prog, self.root, self.seed))
            return 1
        shutil.rmtree(self.root, ignore_errors=True)
        return 0
