#!/usr/bin/env python3
"""Per-peer and per-host wire vs trace on a 3-host namespace cluster (docs/wire.md, "Per peer and
per host"), with cs_wire_p2p: rank r sends 4 x (r + 1) MiB to rank r + 1, nothing else crosses.

1. Every host pair that carried messages is compared exactly: traced p2p bytes = 4 x (r + 1) MiB
   for h(r+1) -> h(r+2), wire bytes / traced within the protocol overhead (1.00-1.10), verdict
   ok; the reverse directions carried only ACKs and nothing traced (not compared); each host's
   wire sends against its expectation (no collective bytes: min = max = its p2p bytes): ok; no
   warning.
2. The same with 3 MB sent from h1 to h2 outside MPI during the job: h1 -> h2 and host h1 are
   flagged "above" with a warning naming them; the other pairs and hosts stay ok.
Exit 77 (skip) where namespaces are unavailable."""
import json
import os
import subprocess
import sys
import tempfile

bindir = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
failures = 0
MIB = 1 << 20
JOB = f"mpirun $CS_CLUSTER_MPI_ARGS -np 3 --map-by node {bindir}/cs_wire_p2p 4 {MIB}"
LISTEN = """import os, socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 5555))
s.listen(1)
if os.fork() == 0:
    c, _ = s.accept()
    while c.recv(65536):
        pass
    os._exit(0)
"""
EXTRA = """import socket
c = socket.create_connection(("10.77.0.2", 5555))
c.sendall(b"x" * 3000000)
c.close()
"""


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def cluster(cmd):
    r = subprocess.run([os.path.join(here, "cluster.sh"), "-n", "3", "--", "sh", "-c", cmd],
                       capture_output=True, text=True, timeout=300)
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    if r.returncode == 77:
        sys.exit(77)
    return r


def wire_of(run):
    return json.load(open(os.path.join(run, "report.json")))["wire"]


SENDS = {("h1", "h2"): 4 * MIB, ("h2", "h3"): 8 * MIB, ("h3", "h1"): 12 * MIB}

with tempfile.TemporaryDirectory() as tmp:
    run = os.path.join(tmp, "run1")
    r = cluster(f"{bindir}/commscope run -q -o {run} --capture auto -- {JOB}")
    check(r.returncode == 0 and "wire_p2p ok" in r.stdout, f"run 1: exit {r.returncode}, results")
    w = wire_of(run)
    peers = {(p["host"], p["peer"]): p for p in w["peers"]}
    check(len(peers) == 6, f"every ordered pair: {sorted(peers)}")
    for k, p in peers.items():
        want = SENDS.get(k, 0)
        check(p["traced_p2p_bytes"] == want, f"{k}: traced p2p {p['traced_p2p_bytes']} vs {want}")
        # The job's only collectives: a barrier (0 bytes) and a 4-byte reduce at the end (a
        # binomial tree sends at most (n - 1) x 4 bytes).
        check(p["collective_bytes_max"] <= 8, f"{k}: next to no collective bytes between them")
        if want:
            print(f"{k}: wire {p['bytes_tx']} traced {want} ratio {p['p2p_ratio']}")
            check(p["p2p_ratio"] is not None and 1.0 <= p["p2p_ratio"] <= 1.10 and
                  p["verdict"] == "ok", f"{k}: exact within the protocol overhead: {p}")
        else:
            check(p["p2p_ratio"] is None and p["verdict"] is None, f"{k}: not compared: {p}")
    hosts = {h["host"]: h for h in w["hosts"]}
    check(sorted(hosts) == ["h1", "h2", "h3"], f"hosts {sorted(hosts)}")
    for (a, _), want in SENDS.items():
        h = hosts.get(a, {})
        check(h.get("p2p_bytes") == want and h.get("collective_bytes_min") == 0 and
              h.get("collective_bytes_max") <= 8 and h.get("verdict") == "ok" and
              1.0 <= h.get("ratio_min", 0) <= 1.10, f"host {a}: {h}")
    check(not w["warnings"], f"no warning: {w['warnings']}")

    run = os.path.join(tmp, "run2")
    for name, text in (("listen.py", LISTEN), ("extra.py", EXTRA)):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)
    r = cluster(f"export CS_P2P_LISTEN='python3 {tmp}/listen.py' "
                f"CS_P2P_EXTRA='python3 {tmp}/extra.py'; "
                f"{bindir}/commscope run -q -o {run} --capture auto -- "
                f"{JOB.replace('--map-by node', '--map-by node -x CS_P2P_LISTEN -x CS_P2P_EXTRA')}")
    check(r.returncode == 0 and "wire_p2p ok" in r.stdout, f"run 2: exit {r.returncode}, results")
    w = wire_of(run)
    peers = {(p["host"], p["peer"]): p for p in w["peers"]}
    hosts = {h["host"]: h for h in w["hosts"]}
    p = peers.get(("h1", "h2"), {})
    print(f"run 2: h1->h2 wire {p.get('bytes_tx')} ratio {p.get('p2p_ratio')}")
    check(p.get("verdict") == "above" and p.get("p2p_ratio", 0) > 1.5, f"h1 -> h2 above: {p}")
    check(hosts.get("h1", {}).get("verdict") == "above", f"host h1 above: {hosts.get('h1')}")
    for k in (("h2", "h3"), ("h3", "h1")):
        check(peers.get(k, {}).get("verdict") == "ok", f"{k} still ok: {peers.get(k)}")
    for h in ("h2", "h3"):
        check(hosts.get(h, {}).get("verdict") == "ok", f"host {h} still ok: {hosts.get(h)}")
    warn = [x for x in w["warnings"] if x.startswith("h1 -> h2: the wire carried")]
    check(len(warn) == 1 and "collectives between them could add at most" in warn[0] and
          "retransmissions or other traffic" in warn[0], f"peer warning: {w['warnings']}")
    check(any(x.startswith("h1 sent ") and "the most the traced communication implies" in x
              for x in w["warnings"]), f"host warning: {w['warnings']}")

sys.exit(1 if failures else 0)
