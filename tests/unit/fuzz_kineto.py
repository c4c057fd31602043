#!/usr/bin/env python3
"""The Kineto importer against damaged PyTorch profiler traces: a structure-aware fuzzer.

Each iteration copies one of the real trace sets of the shared data folder (DLRM on 8 ranks, an
HTA test trace with NCCL collective records), changes one to four things in it (a time, a
duration, an argument of a kernel, runtime call or collective record, the rank or world size,
a process group's ranks; an event removed or duplicated; a file cut short or dropped) and runs
`commscope analyze --from kineto` with every output.  As for traces of the collector
(test_fuzz.c), the analysis must exit with 0, 1 or 3, never by a signal or a sanitizer report,
say why when it is not 0, and when it analysed: write JSON and Perfetto files that parse as JSON
(no NaN or infinity), a complete HTML file and no "nan" or "inf" in the text report.

usage: fuzz_kineto.py SHARED_DATA_DIR [ITERATIONS]; CS_BIN names the build's bin/ folder,
CS_FUZZ_SEED the seed (default 1).  Exit 0 pass, 1 fail, 77 skip (no shared data).
"""
import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support"))
import fuzzlib  # noqa: E402

BIN = os.environ.get("CS_BIN", "")
COMMSCOPE = os.path.join(BIN, "commscope")


def load_set(paths):
    out = []
    for p in paths:
        opener = gzip.open if p.endswith(".gz") else open
        with opener(p, "rt") as f:
            out.append((os.path.basename(p), f.read()))
    return out


def weird_number(rng, v):
    choices = [0, -1, -v if isinstance(v, (int, float)) else -7, 2 ** 63, 2 ** 64 + 5, 1e300,
               -1e300, 1.5, "12", None, [], {}, True, 10 ** 30]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        choices += [v + rng.choice([1, -1, 1000, -1000, 10 ** 9, -10 ** 9]), v * 1000, v / 1000]
    return rng.choice(choices)


def mutate(rng, files):
    """One change to the trace set; returns its description."""
    name, doc = rng.choice(files)
    ev = doc.get("traceEvents") or []
    k = rng.randrange(10)
    if k <= 3 and ev:  # a field of an event, mostly of the ones the importer reads
        i = rng.randrange(len(ev))
        e = ev[i]
        interesting = [x for x in ev if x.get("cat") in ("kernel", "cuda_runtime", "ac2g")
                       or "Collective name" in (x.get("args") or {})]
        if interesting and rng.random() < 0.7:
            e = rng.choice(interesting)
        field = rng.choice(["ts", "dur", "ph", "cat", "name", "pid", "tid", "id", "args"])
        if field == "args" and isinstance(e.get("args"), dict) and e["args"]:
            a = rng.choice(sorted(e["args"]))
            old = e["args"][a]
            if a in ("Process Group Ranks", "In split size", "Out split size"):
                e["args"][a] = rng.choice(["[0, 1, 1]", "[", "[-1, 99]", "[]", "[0,", "x", 5])
            else:
                e["args"][a] = weird_number(rng, old)
            return "%s: event %r args[%r] %r -> %r" % (name, e.get("name", "")[:40], a, old,
                                                      e["args"][a])
        old = e.get(field)
        if field == "ph":
            e[field] = rng.choice(["X", "B", "E", "i", "s", "f", "", None, 5])
        elif field == "cat":
            e[field] = rng.choice(["kernel", "cuda_runtime", "cpu_op", "gpu_memcpy", "ac2g",
                                   "user_annotation", "", None])
        elif field == "name":
            e[field] = rng.choice(["ncclKernel_AllReduce_RING_LL_Sum_float(x)",
                                   "ncclDevKernel_SendRecv(x)", "ProfilerStep#3",
                                   "record_param_comms", "nccl:all_reduce", "", None, 7])
        else:
            e[field] = weird_number(rng, old)
        return "%s: event %r %s %r -> %r" % (name, str(e.get("name", ""))[:40], field, old,
                                             e.get(field))
    if k == 4 and ev:
        i = rng.randrange(len(ev))
        gone = ev.pop(i)
        return "%s: event %r removed" % (name, str(gone.get("name", ""))[:40])
    if k == 5 and ev:
        i = rng.randrange(len(ev))
        ev.insert(rng.randrange(len(ev) + 1), json.loads(json.dumps(ev[i])))
        return "%s: event %r duplicated" % (name, str(ev[i].get("name", ""))[:40])
    if k == 6:
        di = doc.get("distributedInfo")
        if isinstance(di, dict):
            field = rng.choice(["rank", "world_size", "pg_config", "nccl_version", "backend"])
            old = di.get(field)
            if field == "pg_config" and isinstance(old, list) and old:
                pg = rng.choice(old)
                pg["ranks"] = rng.choice([[0, 0], [], [5, 1000], "0,1", None, [-3]])
                return "%s: a process group's ranks -> %r" % (name, pg["ranks"])
            di[field] = weird_number(rng, old) if field != "backend" else rng.choice(
                ["gloo", "", None])
            return "%s: distributedInfo %s %r -> %r" % (name, field, old, di[field])
    if k == 7 and ev:  # every event of one thread shifted: a clock jump
        tid = rng.choice(ev).get("tid")
        d = rng.choice([1, -1]) * 10 ** rng.randrange(1, 14)
        n = 0
        for e in ev:
            if e.get("tid") == tid and isinstance(e.get("ts"), (int, float)):
                e["ts"] += d
                n += 1
        return "%s: %d events of thread %r shifted by %d us" % (name, n, tid, d)
    if k == 8:
        doc["__cut__"] = rng.randrange(1, 2000000)
        return "%s: written cut short at byte %d" % (name, doc["__cut__"])
    if k == 9 and len(files) > 1:
        files.remove((name, doc))
        return "%s: removed" % name
    doc["baseTimeNanoseconds"] = weird_number(rng, doc.get("baseTimeNanoseconds", 0))
    return "%s: baseTimeNanoseconds -> %r" % (name, doc["baseTimeNanoseconds"])


def write_set(files, d):
    for name, doc in files:
        cut = doc.pop("__cut__", None)
        text = json.dumps(doc).encode()
        if cut is not None:
            text = text[:cut]
        p = os.path.join(d, name)
        if name.endswith(".gz"):
            with gzip.open(p, "wb", compresslevel=1) as f:
                f.write(text)
        else:
            with open(p, "wb") as f:
                f.write(text)


def check_outputs(p, out):
    """What is wrong with one analysis, or None."""
    why = fuzzlib.exit_problem(p, (0, 1, 3))
    if why or p.returncode == 3:
        return why
    line = fuzzlib.nonfinite_line(p.stdout)
    if line:
        return "the text report prints a non-finite number: %r" % line
    why = (fuzzlib.json_problem(out + ".json", "JSON report")
           or fuzzlib.json_problem(out + ".pftrace.json", "Perfetto file"))
    if why:
        return why
    try:
        with open(out + ".html") as f:
            if "</html>" not in f.read():
                return "the HTML report is incomplete"
    except OSError as e:
        return "the HTML report: %s" % e
    return None


def main():
    data, iters, seed = fuzzlib.options("fuzz_kineto.py", 60)
    kin = os.path.join(data, "kineto")
    dlrm = os.path.join(kin, "dlrm_8ranks")
    hta = os.path.join(kin, "hta", "nccl_parser_config_nccl_data.json.gz")
    if not os.path.isdir(dlrm) or not os.path.isfile(hta):
        print("skip: the shared Kineto traces are not there (%s)" % kin)
        return 77
    seeds = [load_set(sorted(os.path.join(dlrm, f) for f in os.listdir(dlrm))),
             load_set([hta])]
    rng = random.Random(seed)
    root = tempfile.mkdtemp(prefix="cs-fuzz-kineto-")
    print("fuzz_kineto: %d iterations, seed %d, scratch %s" % (iters, seed, root))
    tally = fuzzlib.Tally("fuzz_kineto", iters, seed, root)
    for it in range(iters):
        files = [(name, json.loads(text)) for name, text in seeds[it % len(seeds)]]
        desc = [mutate(rng, files) for _ in range(rng.randint(1, 4))]
        d = os.path.join(root, "run")
        shutil.rmtree(d, ignore_errors=True)
        os.mkdir(d)
        write_set(files, d)
        out = os.path.join(root, "out")
        for ext in (".json", ".pftrace.json", ".html"):
            if os.path.exists(out + ext):
                os.remove(out + ext)
        try:
            p = subprocess.run([COMMSCOPE, "analyze", "--from", "kineto", d, "--json",
                                out + ".json", "--html", out + ".html", "--perfetto",
                                out + ".pftrace.json"], capture_output=True, text=True,
                               timeout=300)
            why = check_outputs(p, out)
        except subprocess.TimeoutExpired:
            why, p = "did not finish in 300 s", None
        tally.count(p)
        if why:
            tally.fail(it, why, desc, d, os.path.join(root, "fail-%d" % it), p)
    return tally.finish()

if __name__ == "__main__":
    sys.exit(main())
