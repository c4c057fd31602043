#!/usr/bin/env python3
"""`commscope topo` end to end: text and commscope-topology/1 JSON on the shared real-server files
(skipped without them), the live machine, and a malformed file next to a good one."""
import json
import os
import subprocess
import sys
import tempfile

exe, data = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def topo(*args, env=None):
    return subprocess.run([exe, "topo", *args], capture_output=True, text=True, env=env,
                          timeout=60)


with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "t.json")
    # The live machine: whatever it has, the JSON parses and names this host.
    r = topo("--json", out, "--quiet")
    check(r.returncode == 0, f"live topo exit {r.returncode}: {r.stderr}")
    doc = json.load(open(out))
    check(doc["schema"] == "commscope-topology/1", "schema")
    check(doc["hosts"][0]["host"] == os.uname().nodename, "live host name")

    bad = os.path.join(tmp, "bad.xml")
    open(bad, "w").write("<topology version=\"2.0\">\n<object type=\"Machine\">\n</topology>\n")
    juwels = os.path.join(data, "topologies/hwloc/psmgmt_topo.jwb0004_JUWELS-Booster_4xA100_4xHDR.xml")
    ndv5 = os.path.join(data, "topologies/nccl/azure_ndv5-topo.xml")
    if not os.path.exists(juwels):
        print("shared topologies absent: file checks skipped", file=sys.stderr)
        r = topo("--topology", bad)
        check(r.returncode == 1 and "bad.xml:3:" in r.stderr, "malformed file message")
        sys.exit(1 if failures else 0)

    r = topo("--topology", juwels, "--topology", bad, "--topology", ndv5, "--json", out)
    check(r.returncode == 1, f"a bad file makes exit 1 (got {r.returncode})")
    check("bad.xml:3: end tag </topology> does not match <object>" in r.stderr, r.stderr)
    check("host jwb0004.juwels" in r.stdout and "host azure_ndv5-topo" in r.stdout,
          "both good files printed")
    doc = json.load(open(out))
    hosts = {h["host"]: h for h in doc["hosts"]}
    check(set(hosts) == {"jwb0004.juwels", "azure_ndv5-topo"}, f"hosts {list(hosts)}")
    check(doc["errors"] == [bad], f"errors {doc['errors']}")
    j = hosts["jwb0004.juwels"]
    check(len(j["gpus"]) == 4, "JUWELS: 4 GPUs")
    nics = {n["name"]: n for n in j["nics"]}
    paired = [g["nic"] for g in j["gpus"]]
    check(sorted(paired) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"], f"JUWELS pairs {paired}")
    for g in j["gpus"]:
        check(g["distance"] == "pcie-switch", f"JUWELS GPU {g['index']} distance {g['distance']}")
        n = nics[g["nic"]]
        check(n["link_layer"] == "InfiniBand" and n["gbps"] == 200 and n["state"] == "ACTIVE",
              f"JUWELS NIC {n}")
        check(g["numa"] == n["numa"], "GPU and its HCA on one NUMA node")
    check(j["warnings"] == [], f"JUWELS warnings {j['warnings']}")
    a = hosts["azure_ndv5-topo"]
    pairs = {(g["pci"], g["nic"]) for g in a["gpus"]}
    check(len(pairs) == 8 and len({p[1] for p in pairs}) == 8, f"NDv5: 8 distinct pairs {pairs}")
    check(all(g["distance"] == "pcie-switch" for g in a["gpus"]), "NDv5 distances")

    r = topo("--bogus")
    check(r.returncode == 2 and "unexpected argument '--bogus'" in r.stderr, "usage error")
    # COMMSCOPE_TOPOLOGY stands in for --topology.
    env = dict(os.environ, COMMSCOPE_TOPOLOGY=ndv5)
    r = topo(env=env)
    check(r.returncode == 0 and "8 GPU(s), 8 NIC(s)" in r.stdout, "COMMSCOPE_TOPOLOGY")

sys.exit(1 if failures else 0)
