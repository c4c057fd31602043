#!/usr/bin/env python3
"""Port counters in `commscope fabric` (label mpi): the benchmark's node reads the counters of a
saved sysfs tree (COMMSCOPE_SYSFS_ROOT, a copy of tests/data/sysfs/node1) before and after it
runs.  In the copy, mlx5_0 port 1's symbol_error, link_downed and port_xmit_data are named pipes
fed by this test: the first read gets the "before" value, the second the "after" value, as a real
port's counters would move during the benchmark.  Expected: exactly those differences for
mlx5_0/1 (symbol_errors +3, link_downed +1, xmit_bytes +4000 = 1000 words), zero for mlx5_2/1
(plain files), the unreadable ports said so, the node a suspect with that evidence, exit 3.
A second run without the pipes: no errors, exit 0."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading

commscope, tree = sys.argv[1], sys.argv[2]
failures = 0


def check(cond, what):
    global failures
    if not cond:
        failures += 1
        print("FAIL:", what, file=sys.stderr)


def serve(path, values, stop):
    """Give each reader of the pipe at path the next value; give up when stop is set."""
    for v in values:
        while not stop.is_set():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader yet
                stop.wait(0.01)
                continue
            os.set_blocking(fd, True)
            try:
                os.write(fd, f"{v}\n".encode())
            finally:
                os.close(fd)
            # Let this reader see the end and close before the next value is offered: the next
            # reader blocks in open() until then, so waiting costs nothing but keeps the values
            # from running into one read.
            stop.wait(0.3)
            break


def run(root, out):
    env = dict(os.environ, COMMSCOPE_SYSFS_ROOT=root)
    return subprocess.run([commscope, "fabric", "--max-bytes", "1K", "--json", out, "--",
                           "mpirun", "--oversubscribe", "-x", "COMMSCOPE_SYSFS_ROOT", "-np", "2"],
                          capture_output=True, text=True, timeout=60, env=env)


with tempfile.TemporaryDirectory() as tmp:
    root = os.path.join(tmp, "sysfs")
    shutil.copytree(tree, root)
    cdir = os.path.join(root, "class/infiniband/mlx5_0/ports/1/counters")
    pipes = {"symbol_error": (7, 10), "link_downed": (2, 3), "port_xmit_data": (5000, 6000)}
    stop = threading.Event()
    threads = []
    for name, values in pipes.items():
        p = os.path.join(cdir, name)
        os.unlink(p)
        os.mkfifo(p)
        t = threading.Thread(target=serve, args=(p, values, stop), daemon=True)
        t.start()
        threads.append(t)
    out = os.path.join(tmp, "fabric.json")
    r = run(root, out)
    stop.set()
    print(r.stdout)
    print(r.stderr, file=sys.stderr)
    check(r.returncode == 3, f"exit status 3 (a node with port errors) expected, got {r.returncode}")
    doc = json.load(open(out))
    ports = {(p["nic"], p["port"]): p for p in doc["ports"]}
    m0 = ports.get(("mlx5_0", 1), {})
    check(m0.get("valid") is True, "mlx5_0/1 readable")
    check(m0.get("symbol_errors") == 3, f"mlx5_0/1 symbol_errors +3: {m0}")
    check(m0.get("link_downed") == 1, f"mlx5_0/1 link_downed +1: {m0}")
    check(m0.get("xmit_bytes") == 4000, f"mlx5_0/1 xmit_bytes +4000 (1000 words): {m0}")
    check(m0.get("rcv_errors") == 0 and m0.get("xmit_discards") == 0, f"mlx5_0/1 others 0: {m0}")
    m2 = ports.get(("mlx5_2", 1), {})
    check(m2.get("valid") is True and m2.get("symbol_errors") == 0 and m2.get("xmit_bytes") == 0,
          f"mlx5_2/1 unchanged: {m2}")
    check(ports.get(("mlx5_1", 1), {}).get("valid") is False, "mlx5_1/1 (no counters) not valid")
    check(len(doc["nodes"]) == 1 and doc["nodes"][0]["status"] == "errors",
          f"the node has status errors: {doc['nodes']}")
    ev = "port counters during the benchmark: mlx5_0/1: symbol_errors +3, link_downed +1"
    check(len(doc["suspects"]) == 1 and ev in doc["suspects"][0]["evidence"],
          f"the node is the suspect with the counters as evidence: {doc['suspects']}")
    check(ev in r.stdout, "the text report gives the evidence")

    # The same tree with plain files: nothing moved, no suspect.
    clean = os.path.join(tmp, "clean")
    shutil.copytree(tree, clean)
    r = run(clean, out)
    check(r.returncode == 0, f"exit 0 without port errors, got {r.returncode}: {r.stderr}")
    doc = json.load(open(out))
    check(doc["suspects"] == [] and doc["nodes"][0]["status"] == "unmeasured",
          f"no suspect: {doc['suspects']} {doc['nodes']}")

sys.exit(1 if failures else 0)
