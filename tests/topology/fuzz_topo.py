#!/usr/bin/env python3
"""The topology readers (topology/xml.c, load_hwloc.c, load_nccl.c) against damaged files: the
real hwloc XML exports and NCCL topology files of the shared data folder, changed one to four
times per iteration, in their structure (an attribute given a strange value, an element removed,
duplicated or nested again, a tag renamed) or their bytes (a byte changed, inserted or deleted,
the file cut short), then read by `commscope topo --topology FILE --json OUT`.

The command must exit with 0 or 1 (a file that could not be read, said on stderr with its name),
never by a signal or a sanitizer report, within 120 s; when it exits with 0 its JSON must parse
(no NaN or infinity) and its text summary must print no "nan" or "inf".

usage: fuzz_topo.py SHARED_DATA_DIR [ITERATIONS]; CS_BIN names the build's bin/ folder,
CS_FUZZ_SEED the seed (default 1), CS_FUZZ_ITERATIONS overrides ITERATIONS.
Exit 0 pass, 1 fail, 77 skip (no shared data).
"""
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
import fuzzlib  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
COMMSCOPE = os.path.join(BIN, "commscope")
ATTR = re.compile(rb'([A-Za-z_][\w.-]*)="([^"]*)"')
ELEM = re.compile(rb"<([A-Za-z_][\w.-]*)[^<>]*?(/>|>)")
WEIRD = [b"", b"-1", b"0", b"99999999999999999999999", b"1e308", b"-1e308", b"nan", b"inf",
         b"abc", b"0x", b"4294967296", b"-2147483649", b"1.5", b"&amp;", b"&#0;", b"&#x110000;",
         b"&bogus;", b"0000:zz:00.0", b"ffff:ff:ff.f", b"12,34", b" 7 ", b"2147483647"]


def mutate(rng, data):
    k = rng.randrange(9)
    if k <= 2:  # an attribute value
        attrs = list(ATTR.finditer(data))
        if attrs:
            m = rng.choice(attrs)
            v = rng.choice(WEIRD) if rng.random() < 0.8 else m.group(2) * rng.randint(2, 50)
            return (data[:m.start(2)] + v + data[m.end(2):],
                    "%s=%r -> %r" % (m.group(1).decode(), m.group(2)[:30], v[:30]))
    if k == 3:  # an element (its start tag) removed
        el = list(ELEM.finditer(data))
        if el:
            m = rng.choice(el)
            return data[:m.start()] + data[m.end():], "<%s> start tag removed" % m.group(1).decode()
    if k == 4:  # an element's start tag repeated (unbalanced, or nested deeper)
        el = list(ELEM.finditer(data))
        if el:
            m = rng.choice(el)
            n = rng.choice([1, 2, 300])
            return (data[:m.start()] + m.group(0) * (n + 1) + data[m.end():],
                    "<%s> start tag repeated %d times" % (m.group(1).decode(), n))
    if k == 5:  # a tag renamed
        el = list(ELEM.finditer(data))
        if el:
            m = rng.choice(el)
            new = rng.choice([b"gpu", b"nic", b"pci", b"net", b"object", b"cpu", b"nvlink", b"x"])
            return (data[:m.start(1)] + new + data[m.end(1):],
                    "<%s> renamed <%s>" % (m.group(1).decode(), new.decode()))
    if k == 6 and data:  # a byte changed
        i = rng.randrange(len(data))
        c = rng.choice(b'<>"=/&;!?- \n\x00\xff' + bytes([rng.randrange(256)]))
        return data[:i] + bytes([c]) + data[i + 1:], "byte %d -> %r" % (i, bytes([c]))
    if k == 7 and data:  # bytes inserted or deleted
        i = rng.randrange(len(data))
        if rng.random() < 0.5:
            n = rng.randint(1, 40)
            return data[:i] + data[i + n:], "%d bytes deleted at %d" % (n, i)
        ins = rng.choice([b"<", b">", b"</", b"<!--", b"-->", b"<?x", b"<!DOCTYPE", b'"', b"&"])
        return data[:i] + ins + data[i:], "%r inserted at %d" % (ins, i)
    i = rng.randrange(len(data) + 1)
    return data[:i], "cut at byte %d" % i


def check(p, out, data):
    why = fuzzlib.exit_problem(p, (0, 1))
    if why:
        return why
    if p.returncode == 1:
        return None if "input.xml" in p.stderr else "exit status 1 without naming the file"
    # (a "nan" or "inf" the input itself holds may be echoed as text: a name, a bus id)
    line = None if fuzzlib.NONFINITE.search(data.decode("latin-1")) else \
        fuzzlib.nonfinite_line(p.stdout)
    if line:
        return "the summary prints a non-finite number: %r" % line
    return fuzzlib.json_problem(out, "JSON")


def main():
    data_dir, iters, seed = fuzzlib.options("fuzz_topo.py", 200)
    top = os.path.join(data_dir, "topologies")
    seeds = []
    for sub in ("hwloc", "nccl"):
        d = os.path.join(top, sub)
        if os.path.isdir(d):
            for f in sorted(os.listdir(d)):
                if f.endswith(".xml"):
                    with open(os.path.join(d, f), "rb") as fh:
                        seeds.append((f, fh.read()))
    if not seeds:
        print("skip: the shared topology files are not there (%s)" % top)
        return 77
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="cs-fuzz-topo-")
    print("fuzz_topo: %d iterations, seed %d, %d seed files, scratch %s"
          % (iters, seed, len(seeds), root))
    tally = fuzzlib.Tally("fuzz_topo", iters, seed, root)
    for it in range(iters):
        name, data = seeds[it % len(seeds)]
        desc = []
        for _ in range(rng.randint(1, 4)):
            data, d = mutate(rng, data)
            desc.append(d)
        path = os.path.join(root, "input.xml")
        with open(path, "wb") as f:
            f.write(data)
        out = os.path.join(root, "out.json")
        if os.path.exists(out):
            os.remove(out)
        try:
            p = subprocess.run([COMMSCOPE, "topo", "--topology", path, "--json", out],
                               capture_output=True, text=True, errors="replace", timeout=120)
            why = check(p, out, data)
        except subprocess.TimeoutExpired:
            p, why = None, "did not finish in 120 s"
        tally.count(p)
        if why:
            tally.fail(it, "%s: %s" % (name, why), desc, path,
                       os.path.join(root, "fail-%d.xml" % it), p)
    return tally.finish()


if __name__ == "__main__":
    sys.exit(main())
