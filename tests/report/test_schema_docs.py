#!/usr/bin/env python3
"""Every key commscope writes into its JSON outputs is documented, and every key the report schema
documents as always present is written.

docs/report-schema.md gives the analysis report (`commscope-report/1`) as pseudo-JSON blocks:
they are parsed here into key paths (`ranks[].wait_s`, `budget.total.comm_s.dp`, ...), with
`BUDGET` expanded and `{...}` or `...` marking a map whose keys are data.  The `topology` section
is described in the key table: its key names must appear there in backticks.  The other outputs
(`commscope topo --json`, `commscope fabric --json`, `commscope compare --json`) are described in
prose: each key name must appear in backticks in its section.

Usage: test_schema_docs.py unit|mpi SOURCE_DIR SHARED_DATA; CS_BIN names the build's bin/.
  unit: synthetic runs (four ranks, a broken run, GPU and NCCL point-to-point records), a Kineto
        import of the shared traces (when present), `commscope topo` on a shared hwloc file.
  mpi:  cs_train2d (steps, groups, what-if), the pipeline test program (point-to-point waits)
        under `commscope run`, `commscope compare` of two runs, `commscope fabric` on 2 ranks.
Exit 77 (skip) for `mpi` without mpirun.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

BIN = os.environ.get("CS_BIN", "")
COMMSCOPE = os.path.join(BIN, "commscope")
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what)
    return cond


def must(cmd, ok=(0,), **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240, **kw)
    if p.returncode not in ok:
        print("command failed (%d): %s\n%s%s" % (p.returncode, " ".join(cmd), p.stdout,
                                                   p.stderr))
        sys.exit(1)
    return p


# ---- the documentation ------------------------------------------------------------------------

TOKEN = re.compile(r'"([A-Za-z_][A-Za-z0-9_]*)"\s*:|(\{\.\.\.\})|(\.\.\.)|([{}\[\]])|'
                   r'\b(BUDGET)\b(\s*=)?')


def parse_block(text, defs):
    """Key paths of one pseudo-JSON block.  defs: macro name -> list of relative paths (filled
    from `NAME = {...}` definitions).  Returns (paths, open_maps, placeholders, refs): refs are (path, macro)
    places where a macro is used; placeholders: `"key": {...}` objects, described elsewhere or
    maps)."""
    paths, maps, refs = set(), set(), []
    placeholders = set()  # `"key": {...}`: an object described elsewhere, or a map
    stack = [""]          # path of the object or array element being read
    last = None           # the key just read, whose value comes next
    macro = None          # a macro whose body (read at path "$NAME") is the next object
    for m in TOKEN.finditer(text):
        key, ellipsis_map, ellipsis, br, name, assign = m.groups()
        top = stack[-1]
        if key:
            last = key
            paths.add((top + "." + key).lstrip("."))
        elif ellipsis_map and last:
            placeholders.add((top + "." + last).lstrip("."))
            last = None
        elif ellipsis_map or ellipsis:
            maps.add(top)
            last = None
        elif name and assign:
            macro = name
            last = None
        elif name:
            refs.append(((top + "." + last).lstrip(".") if last else top, name))
        elif br in "{[":
            if last is not None:
                p = (top + "." + last).lstrip(".")
                stack.append(p + ("[]" if br == "[" else ""))
                last = None
            elif macro and br == "{":
                stack.append("$" + macro)
                macro = None
            else:
                stack.append(top)
        elif br in "}]":
            if len(stack) > 1:
                stack.pop()
            last = None
    for p in list(paths):
        if p.startswith("$"):
            nm, _, rest = p[1:].partition(".")
            defs.setdefault(nm, set()).add(rest)
            paths.discard(p)
    return paths, maps, placeholders, refs


def report_schema(src):
    doc = open(os.path.join(src, "docs", "report-schema.md")).read()
    head, _, _ = doc.partition("## `commscope-topology/1`")
    blocks = re.findall(r"```\n(.*?)```", head, re.S)
    paths, maps, holders, refs, defs = set(), set(), set(), [], {}
    for b in blocks:
        p, m, h, r = parse_block(b, defs)
        paths |= p
        maps |= m
        holders |= h
        refs += r
    for at, name in refs:
        for rel in defs.get(name, ()):
            paths.add(at + "." + rel)
    # `"wire": {...}` in one block, its keys in another: not a map of data keys
    maps |= {h for h in holders if not any(p.startswith(h + ".") for p in paths)}
    # the table row of `topology` (described in prose)
    row = re.search(r"^\| `topology` \|(.*)$", head, re.M)
    topo_names = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\[\])?`", row.group(1))) if row \
        else set()
    return paths, maps, topo_names


def section_names(path, start, end=None):
    """Key names in backticks or quotes in a prose section of a document."""
    doc = open(path).read()
    i = doc.find(start)
    if i < 0:
        return set()
    j = doc.find(end, i + len(start)) if end else -1
    text = doc[i:j if j > 0 else None]
    return set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\[\])?`", text)) | \
        set(re.findall(r'"([A-Za-z_][A-Za-z0-9_]*)"', text))


# ---- the outputs ------------------------------------------------------------------------------

def key_paths(v, p=""):
    out = []
    if isinstance(v, dict):
        for k, x in v.items():
            q = (p + "." + k).lstrip(".")
            out.append(q)
            out += key_paths(x, q)
    elif isinstance(v, list):
        for x in v:
            out += key_paths(x, p + "[]")
    return out


CONDITIONAL = ("gpu", "nccl_p2p", "kineto", "wire", "topology", "hang", "flops", "phases",
               "resources")


def check_report(what, rep, schema):
    paths, maps, topo_names = schema
    for p in key_paths(rep):
        if p == "topology" or p.startswith("topology."):
            leaf = p.rsplit(".", 1)[-1]
            check(leaf in topo_names or p == "topology",
                  "%s: %s is not described in report-schema.md's `topology` row" % (what, p))
            continue
        parent = p.rsplit(".", 1)[0] if "." in p else ""
        check(p in paths or parent in maps or any(parent.startswith(m + ".") for m in maps),
              "%s: key %s is not in report-schema.md" % (what, p))


def check_always_present(reps, schema):
    """Keys documented as always present, missing from a complete report."""
    paths = schema[0]
    for what, rep in reps:
        got = set(key_paths(rep))
        for p in sorted(paths):
            if p.split(".")[0].split("[")[0] in CONDITIONAL:
                continue
            # an element's keys exist only when the array has elements; a null object has none
            parent = p.rsplit(".", 1)[0] if "." in p else ""
            if parent and not parent_present(rep, parent):
                continue
            check(p in got, "%s: documented key %s missing" % (what, p))


def parent_present(rep, path):
    """Does the object at path exist with content (arrays: some element; objects: not null)?"""
    cur = [rep]
    for part in path.split("."):
        arr = part.endswith("[]")
        part = part[:-2] if arr else part
        nxt = []
        for c in cur:
            if isinstance(c, dict) and c.get(part) is not None:
                v = c[part]
                nxt += v if arr and isinstance(v, list) else ([] if arr else [v])
        cur = nxt
    return any(isinstance(c, dict) for c in cur)


def check_names(what, doc, names):
    for p in key_paths(doc):
        leaf = p.rsplit(".", 1)[-1]
        check(leaf in names, "%s: key %s is not described in its documentation" % (what, p))


def analyze(d, tmp, name, extra=()):
    out = os.path.join(tmp, name + ".json")
    must([COMMSCOPE, "analyze", d, "-q", "--json", out] + list(extra), ok=(0, 1, 4))
    return json.load(open(out))


def case_unit(src, data, tmp, schema):
    reps = []
    for kind in ("four", "broken", "many1"):
        d = os.path.join(tmp, kind)
        must([os.path.join(BIN, "test_golden"), "--write-run", d, kind])
        reps.append(("synthetic %s" % kind, analyze(d, tmp, kind)))
    d = os.path.join(tmp, "gpu")
    must([os.path.join(BIN, "gpu_run"), d])
    rep = analyze(d, tmp, "gpu")
    check("gpu" in rep, "the GPU run has the gpu section")
    reps.append(("synthetic GPU run", rep))
    kin = os.path.join(data, "kineto", "dlrm_8ranks")
    if os.path.isdir(kin):
        files = sorted(os.path.join(kin, f) for f in os.listdir(kin) if f.endswith(".json"))
        out = os.path.join(tmp, "kineto.json")
        must([COMMSCOPE, "analyze", "--from", "kineto"] + files + ["-q", "--json", out,
                                                                  "--params", "1M",
                                                                  "--tokens-per-step", "1k",
                                                                  "--samples-per-step", "8"],
             ok=(0, 1))
        rep = json.load(open(out))
        check("kineto" in rep, "the Kineto import has the kineto section")
        check("flops" in rep, "--params gives the flops section")
        reps.append(("Kineto import", rep))
    else:
        print("note: %s absent, Kineto import not checked" % kin)
    for what, rep in reps:
        check_report(what, rep, schema)
    check_always_present([(w, r) for w, r in reps if w != "synthetic broken"], schema)
    # commscope topo --json
    topo_doc = os.path.join(src, "docs", "report-schema.md")
    names = section_names(topo_doc, "## `commscope-topology/1`", "## `commscope-fabric/1`")
    xml = os.path.join(data, "topologies", "hwloc", "hwloc-tests_nvidiaDGX2.xml")
    if os.path.exists(xml):
        out = os.path.join(tmp, "topo.json")
        must([COMMSCOPE, "topo", "--topology", xml, "--json", out, "--quiet"])
        doc = json.load(open(out))
        check(doc.get("hosts") and doc["hosts"][0].get("gpus"), "topo found the DGX-2's GPUs")
        check_names("commscope topo", doc, names | {"schema"})
    else:
        print("note: %s absent, commscope topo not checked" % xml)
    return 0


def case_mpi(src, tmp, schema):
    if not shutil.which("mpirun"):
        print("SKIP: no mpirun")
        return 77
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_rmaps_base_oversubscribe="1")
    mpirun = ["mpirun", "--oversubscribe"]
    reps, runs = [], []
    for name, n, prog in (("train2d", 4, ["cs_train2d", "--steps", "6", "--steps-marker",
                                          "--slow-rank", "3"]),
                          ("pipeline", 4, ["cs_test_pipeline"]),
                          ("train1", 1, ["cs_train", "--steps", "4", "--steps-marker"]),
                          ("train2", 2, ["cs_train", "--steps", "4", "--steps-marker"])):
        d = os.path.join(tmp, name)
        must([COMMSCOPE, "run", "-o", d, "--quiet", "--"] + mpirun +
             ["-np", str(n), os.path.join(BIN, prog[0])] + prog[1:], ok=(0, 1), env=env)
        reps.append((name, json.load(open(os.path.join(d, "report.json")))))
        runs.append(d)
    for what, rep in reps:
        check_report(what, rep, schema)
    check_always_present(reps, schema)
    check(any(g for _, r in reps for g in r.get("groups", [])), "a run with groups was checked")
    check(any((r.get("whatif") or {}).get("replayed_step_s") for _, r in reps),
          "a run with a replayed what-if was checked")
    # commscope compare --json
    guide = os.path.join(src, "docs", "user-guide.md")
    out = os.path.join(tmp, "compare.json")
    must([COMMSCOPE, "compare", runs[2], runs[3], "--strong", "--json", out])
    names = section_names(guide, 'JSON (`schema` "commscope-compare/1")', "## ")
    check_names("commscope compare", json.load(open(out)), names | {"schema"})
    # commscope fabric --json
    out = os.path.join(tmp, "fabric.json")
    must([COMMSCOPE, "fabric", "--max-bytes", "4K", "--pair-bytes", "64K", "--pair-iters", "2",
          "--nccl", "off", "--json", out, "--"] + mpirun + ["-np", "2"], ok=(0, 3), env=env)
    names = section_names(os.path.join(src, "docs", "report-schema.md"),
                          "## `commscope-fabric/1`")
    check_names("commscope fabric", json.load(open(out)), names)
    return 0


def main():
    mode, src, data = sys.argv[1], sys.argv[2], sys.argv[3]
    schema = report_schema(src)
    paths, maps = schema[0], schema[1]
    check(len(paths) > 150 and "budget.total.comm_s.dp" in paths and
          "budget.ranks[].rank" in paths and "budget.ranks[].idle_s" in paths and
          "wire.peers[].verdict" in paths and "gradient_sync.share" in paths and
          maps == {"kineto.ranks[].nccl_by_collective", "topology"} and "port_counters" in schema[2],
          "report-schema.md parsed: %d key paths, maps %s" % (len(paths), sorted(maps)))
    with tempfile.TemporaryDirectory() as tmp:
        if mode == "unit":
            rc = case_unit(src, data, tmp, schema)
        else:
            rc = case_mpi(src, tmp, schema)
    if rc == 77:
        return 77
    print("%s: %d failures" % (mode, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
